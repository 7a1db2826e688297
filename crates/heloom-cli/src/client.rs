//! `heloom client`: talk to a running `heloom serve` from scripts (JSON on stdout).

use anyhow::{bail, Context as _, Result};
use clap::{Args, Subcommand};
use heloom_serve::client::{Client, SubmitJob};
use heloom_serve::worker::Task;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `heloom client`.
#[derive(Args, Debug)]
pub struct ClientArgs {
    /// The server (or set HELOOM_URL).
    #[arg(long, env = "HELOOM_URL", default_value = "http://127.0.0.1:8787")]
    url: String,
    /// For an https:// server with a private or self-signed certificate: the CA certificate
    /// (PEM) to trust (or set HELOOM_CA).
    #[arg(long, env = "HELOOM_CA")]
    ca: Option<PathBuf>,
    #[command(subcommand)]
    command: ClientCommand,
}

/// Which page of a list (`jobs`, `objects`).
#[derive(Args, Debug)]
struct PageArgs {
    /// At most this many (at most 10000).
    #[arg(long, conflicts_with = "all")]
    limit: Option<usize>,
    /// Only those before this position: the previous page's next_before.
    #[arg(long, conflicts_with = "all")]
    before: Option<i64>,
    /// Every one, page by page.
    #[arg(long)]
    all: bool,
}

#[derive(Subcommand, Debug)]
enum ClientCommand {
    /// Upload objects (key sets, ciphertexts, task graphs), streamed; prints each object's
    /// description.
    Upload {
        /// Files written by heloom (parameters followed by evaluation keys, a ciphertext, a
        /// task graph).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// List this tenant's objects, newest first (the newest 1000 unless --all or --limit).
    Objects {
        #[command(flatten)]
        page: PageArgs,
    },
    /// Delete one of this tenant's objects.
    Delete {
        /// Object id.
        id: String,
    },
    /// Submit a job; prints it (or waits for it with --wait).
    Submit {
        /// Idempotency key: resubmitting the same job with it gives the same job.
        #[arg(long)]
        idempotency_key: String,
        /// Key set object id.
        #[arg(long)]
        key: String,
        /// Input ciphertext object ids, in order.
        #[arg(long = "input")]
        inputs: Vec<String>,
        /// What to compute: `exp`, `exp:VARIANT`, `polynomial:C0,C1,...`, `graph:ID`,
        /// `matmul:FILE` (a JSON array of the square matrix's rows), `matmul_encrypted:SIDE`
        /// (inputs A then B) or `cryptonets:batch` / `cryptonets:single`.
        #[arg(long)]
        task: String,
        /// Higher runs first among this tenant's jobs.
        #[arg(long, default_value_t = 0)]
        priority: i32,
        /// Unix time after which the result is of no use.
        #[arg(long)]
        deadline_unix: Option<i64>,
        /// Keep the result at this level at most (exact; smaller to store and fetch). 0 keeps
        /// only the first prime q0: every slot value must then stay below q0 / (2 * scale).
        #[arg(long)]
        result_level: Option<usize>,
        /// Wait for the job to end (progress on stderr).
        #[arg(long)]
        wait: bool,
    },
    /// One job.
    Job {
        /// Job id.
        id: i64,
    },
    /// Delete an ended job's record (its result object stays; its idempotency key is free).
    DeleteJob {
        /// Job id.
        id: i64,
    },
    /// This tenant's jobs, newest first (the newest 1000 unless --all or --limit).
    Jobs {
        /// Only jobs in this state: accepted, running, done, failed or cancelled.
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Wait for a job to end, with progress on stderr.
    Wait {
        /// Job id.
        id: i64,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 3600.0)]
        timeout: f64,
    },
    /// Cancel a job.
    Cancel {
        /// Job id.
        id: i64,
    },
    /// Save a finished job's result (its output ciphertexts, one after another).
    Result {
        /// Job id.
        id: i64,
        /// Where to write it.
        #[arg(long)]
        out: PathBuf,
    },
}

fn parse_task(s: &str) -> Result<Task> {
    let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
    Ok(match kind {
        "exp" => Task::Exp {
            variant: (!arg.is_empty()).then(|| arg.to_string()),
        },
        "polynomial" => Task::Polynomial {
            coefficients: arg
                .split(',')
                .map(|c| c.trim().parse::<f64>())
                .collect::<std::result::Result<_, _>>()
                .with_context(|| {
                    format!("--task {s}: coefficients are numbers, comma-separated")
                })?,
        },
        "graph" if !arg.is_empty() => Task::Graph {
            graph_id: arg.to_string(),
        },
        "matmul" if !arg.is_empty() => {
            let text = std::fs::read_to_string(arg).with_context(|| format!("--task {s}"))?;
            Task::Matmul {
                matrix: serde_json::from_str(&text).with_context(|| {
                    format!(
                        "--task {s}: {arg} must hold a JSON array of rows, e.g. [[1, 2], [3, 4]]"
                    )
                })?,
            }
        }
        "matmul_encrypted" => Task::MatmulEncrypted {
            side: arg.parse().with_context(|| {
                format!("--task {s}: use matmul_encrypted:SIDE, the matrices' side d")
            })?,
        },
        "cryptonets" => Task::Cryptonets {
            packing: arg.parse().with_context(|| {
                format!("--task {s}: use cryptonets:batch or cryptonets:single")
            })?,
        },
        _ => bail!(
            "--task {s:?}: use exp, exp:VARIANT, polynomial:C0,C1,..., graph:ID, matmul:FILE, \
             matmul_encrypted:SIDE, cryptonets:batch or cryptonets:single"
        ),
    })
}

fn print<T: serde::Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn wait(client: &Client, id: i64, timeout: f64) -> Result<heloom_serve::api::JobView> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("job {msg} [{bar:30}] {pos}/{len} tasks")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(id.to_string());
    let job = client.wait_with(id, Duration::from_secs_f64(timeout.max(0.0)), &mut |j| {
        if let Some(p) = &j.progress {
            bar.set_length(p.tasks_total as u64);
            bar.set_position(p.tasks_done as u64);
        }
    })?;
    bar.finish_and_clear();
    Ok(job)
}

/// Runs `heloom client ...`.
pub fn run(args: &ClientArgs) -> Result<()> {
    let token = std::env::var("HELOOM_TOKEN").map_err(|_| {
        anyhow::anyhow!(
            "set HELOOM_TOKEN to your bearer token (`heloom serve token create` prints one)"
        )
    })?;
    let client = match &args.ca {
        Some(path) => {
            let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            Client::with_ca(&args.url, token.trim(), &pem)?
        }
        None => Client::new(&args.url, token.trim())?,
    };
    match &args.command {
        ClientCommand::Upload { files } => {
            for f in files {
                print(&client.upload_file(f)?)?;
            }
        }
        ClientCommand::Objects { page } => {
            if page.all {
                print(&client.all_objects()?)?
            } else {
                print(&client.objects_page(page.limit, page.before)?.objects)?
            }
        }
        ClientCommand::Delete { id } => client.delete_object(id)?,
        ClientCommand::Submit {
            idempotency_key,
            key,
            inputs,
            task,
            priority,
            deadline_unix,
            result_level,
            wait: w,
        } => {
            let mut job = SubmitJob::new(idempotency_key, key, inputs.clone(), parse_task(task)?);
            job.priority = *priority;
            job.deadline_unix = *deadline_unix;
            job.result_level = *result_level;
            let j = client.submit(&job)?;
            if *w {
                print(&wait(&client, j.id, 3600.0)?)?;
            } else {
                print(&j)?;
            }
        }
        ClientCommand::Job { id } => print(&client.job(*id)?)?,
        ClientCommand::DeleteJob { id } => client.delete_job(*id)?,
        ClientCommand::Jobs { state, page } => {
            if page.all {
                print(&client.all_jobs(state.as_deref())?)?
            } else {
                let q = heloom_serve::client::JobsQuery {
                    state: state.clone(),
                    limit: page.limit,
                    before: page.before,
                };
                print(&client.jobs_page(&q)?.jobs)?
            }
        }
        ClientCommand::Wait { id, timeout } => print(&wait(&client, *id, *timeout)?)?,
        ClientCommand::Cancel { id } => print(&client.cancel(*id)?)?,
        ClientCommand::Result { id, out } => {
            let bytes = client.result_bytes(*id)?;
            std::fs::write(out, &bytes).with_context(|| format!("writing {}", out.display()))?;
            eprintln!("{} bytes -> {}", bytes.len(), out.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_parse() {
        let dir = std::env::temp_dir().join(format!("heloom-cli-matmul-{}", std::process::id()));
        std::fs::write(&dir, "[[1, 2], [3, 4.5]]").expect("write");
        let path = dir.to_string_lossy();
        assert_eq!(
            parse_task(&format!("matmul:{path}")).expect("matmul"),
            Task::Matmul {
                matrix: vec![vec![1.0, 2.0], vec![3.0, 4.5]]
            }
        );
        std::fs::remove_file(&dir).ok();
        assert!(parse_task("matmul:/nonexistent/heloom.json").is_err());
        assert_eq!(
            parse_task("cryptonets:single").expect("single"),
            Task::Cryptonets {
                packing: heloom_apps::cryptonets::evaluate::Packing::Single
            }
        );
        assert!(parse_task("cryptonets:triple").is_err());
        assert_eq!(
            parse_task("matmul_encrypted:16").expect("side"),
            Task::MatmulEncrypted { side: 16 }
        );
        assert!(parse_task("matmul_encrypted:x").is_err());
        assert!(parse_task("nothing").is_err());
    }
}
