//! `heloom serve`: the multi-tenant service (see heloom-serve), and its administration (its
//! durable state in a data directory).

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use heloom_serve::{default_data_dir, Server, ServerConfig, State};
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `heloom serve`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    #[command(subcommand)]
    command: Option<ServeCommand>,
    #[command(flatten)]
    run: RunArgs,
}

/// How the server runs.
#[derive(Args, Debug)]
struct RunArgs {
    /// The service's data directory: database, stored objects, spill files (default: heloom
    /// under the user's data directory).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Address to listen on (loopback unless --allow-remote).
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: std::net::SocketAddr,
    /// Threads for HE tasks (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    /// Jobs run at once (default: threads + 1; threads / 2 + 1 with --memory-budget), plus
    /// express slots (half as many, at least one) for tenants running fewer jobs than their fair
    /// share of the slots.
    #[arg(long, default_value_t = 0)]
    max_in_flight: usize,
    /// Most threads one tenant's tasks hold at once, a per-tenant thread quota (default: no
    /// cap; the tenants still share the threads fairly).
    #[arg(long)]
    max_tenant_threads: Option<usize>,
    /// Memory budget for loaded keys, e.g. 512M or 4G (default: no budget); keys beyond it
    /// are dropped from memory and loaded again from the data directory when next used.
    #[arg(long, value_parser = parse_size)]
    memory_budget: Option<u64>,
    /// Largest object upload, e.g. 8G.
    #[arg(long, value_parser = parse_size, default_value = "8G")]
    max_upload: u64,
    /// Most jobs one tenant may have queued; more are refused with 429 and a retry hint.
    #[arg(long, default_value_t = 10_000)]
    max_queued: u64,
    /// Most bytes one tenant may store, e.g. 64G.
    #[arg(long, value_parser = parse_size, default_value = "64G")]
    max_stored: u64,
    /// Cost profile for the scheduler: a built-in name, a JSON file from `heloom profile`, or
    /// `measure` (measure this machine now, about 10 s on 2 cores to a minute on many, and keep
    /// it as DATA/profile.json, the default of later starts). Default: DATA/profile.json when
    /// present, else the built-in xeon-phi-7230f shapes.
    #[arg(long)]
    profile: Option<String>,
    /// Accept CKKS parameters below 128-bit security (tests and demos only).
    #[arg(long)]
    allow_insecure: bool,
    /// Allow a non-loopback --listen address without TLS (behind a TLS-terminating proxy).
    #[arg(long)]
    allow_remote: bool,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM); needs --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Run jobs on a Ray cluster at this address (HOST:PORT, or `auto`): a heloom node server
    /// on every Ray node, jobs placed by the cost model; this server stays the API, the job
    /// records and the results (needs `pip install heloom[ray]`).
    #[arg(long, value_name = "ADDRESS")]
    ray: Option<String>,
    /// The Python with `heloom[ray]` that runs the Ray bridge (default: $HELOOM_PYTHON, else
    /// python3 from the PATH).
    #[arg(long, value_name = "PATH", requires = "ray")]
    ray_python: Option<PathBuf>,
    /// Run jobs on this many node servers on this machine instead (no Ray): each a `heloom
    /// serve` with its own threads, jobs placed as on Ray (e.g. one node per NUMA socket).
    #[arg(long, value_name = "N", conflicts_with = "ray")]
    local_nodes: Option<usize>,
    /// Threads of each local node server (default: the cores divided among the nodes).
    #[arg(long, value_name = "T", requires = "local_nodes")]
    node_threads: Option<usize>,
    /// Pin each local node server to its own cores (needs `taskset`).
    #[arg(long, requires = "local_nodes")]
    pin_nodes: bool,
    /// Seconds a node server (--ray, --local-nodes) may take for a request other than a key
    /// set upload (inputs and results included: raise it for slow links and large
    /// ciphertexts); one that does not answer in time has its jobs placed elsewhere, is asked
    /// again every 2 s, and takes jobs again once it answers.
    #[arg(long, value_name = "SECONDS", default_value_t = 20.0)]
    node_timeout: f64,
    /// Treat the data directory as scratch space: nothing is synced to the disk, so a crash
    /// of the machine may lose what it stores. For node servers behind a `--local-nodes` or
    /// `--ray` front (they start with it), which keeps every record and result durably and
    /// runs a lost job again; never for a server clients talk to.
    #[arg(long, conflicts_with_all = ["ray", "local_nodes"])]
    scratch: bool,
    /// The GPU that runs jobs beside the CPU lanes, pulling from the same queue: `auto` (the
    /// first CUDA device where there is one), `off`, a CUDA device number, or `emulator` (the
    /// kernels on the host: tests only). With --ray or --local-nodes the nodes decide.
    #[arg(long, default_value = "auto", value_parser = parse_gpu)]
    gpu: heloom_serve::gpu::GpuChoice,
}

/// `512M`, `4G`, `1.5G`, `1000000` (bytes).
fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("{s:?}: use a number of bytes with K, M, G or T")),
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: use a number of bytes with K, M, G or T (e.g. 512M)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{s:?}: the size must be positive"));
    }
    Ok((v * mult as f64) as u64)
}

#[derive(Subcommand, Debug)]
enum ServeCommand {
    /// Bearer tokens of the service's tenants.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// The local node bridge that `heloom serve --local-nodes` starts (not for direct use).
    #[command(hide = true)]
    Nodes(crate::nodes::NodesArgs),
}

#[derive(Subcommand, Debug)]
enum TokenCommand {
    /// Create a token for a tenant (the tenant is created if new) and print it: it is shown
    /// once, only its SHA-256 is stored.
    Create {
        /// The service's data directory (default: heloom under the user's data directory).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Tenant name: 1 to 64 of a-z, 0-9, '-', '_'.
        #[arg(long)]
        tenant: String,
    },
    /// Revoke a token (read from the HELOOM_TOKEN environment variable, so it stays out of the
    /// shell history and the process list).
    Revoke {
        /// The service's data directory.
        #[arg(long)]
        data: Option<PathBuf>,
    },
    /// List the tenants with their number of active tokens.
    List {
        /// The service's data directory.
        #[arg(long)]
        data: Option<PathBuf>,
    },
}

/// Runs `heloom serve ...`.
pub fn run(args: &ServeArgs) -> Result<()> {
    let open = |data: &Option<PathBuf>| -> Result<State> {
        let dir = data.clone().unwrap_or_else(default_data_dir);
        Ok(State::open(dir)?)
    };
    let Some(command) = &args.command else {
        return serve(&args.run);
    };
    match command {
        ServeCommand::Nodes(a) => return crate::nodes::run(a),
        ServeCommand::Token { command } => match command {
            TokenCommand::Create { data, tenant } => {
                let state = open(data)?;
                let token = state.create_token(tenant)?;
                eprintln!(
                    "token for tenant {tenant} (data {}); store it now, it is not shown again:",
                    state.dir().display()
                );
                println!("{token}");
            }
            TokenCommand::Revoke { data } => {
                let token = std::env::var("HELOOM_TOKEN")
                    .map_err(|_| anyhow::anyhow!("set HELOOM_TOKEN to the token to revoke"))?;
                let state = open(data)?;
                if state.revoke_token(token.trim())? {
                    println!("revoked");
                } else {
                    anyhow::bail!(
                        "no active token matches HELOOM_TOKEN in {}",
                        state.dir().display()
                    );
                }
            }
            TokenCommand::List { data } => {
                let state = open(data)?;
                println!("{:<24} {:>13}", "tenant", "active tokens");
                for (name, n) in state.tenants()? {
                    println!("{name:<24} {n:>13}");
                }
            }
        },
    }
    Ok(())
}

fn parse_gpu(s: &str) -> std::result::Result<heloom_serve::gpu::GpuChoice, String> {
    s.parse()
}

/// `heloom serve`: runs the server until Ctrl-C or SIGTERM.
fn serve(a: &RunArgs) -> Result<()> {
    let dir = a.data.clone().unwrap_or_else(default_data_dir);
    let own = dir.join("profile.json");
    let (name, profile) = match &a.profile {
        Some(m) if m == "measure" => {
            eprintln!(
                "heloom serve: measuring this machine's cost profile (kept as {})",
                own.display()
            );
            let p = heloom_bench::profile::measure_default()?;
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("creating the data directory {}", dir.display()))?;
            p.save(&own)
                .with_context(|| format!("saving the profile to {}", own.display()))?;
            (format!("{} (measured now)", own.display()), p)
        }
        Some(p) => (p.clone(), heloom_runtime::Profile::load(p)?),
        None if own.exists() => (
            own.display().to_string(),
            heloom_runtime::Profile::load(&own.to_string_lossy())?,
        ),
        None => {
            let builtin = heloom_runtime::Profile::builtin_names()
                .first()
                .copied()
                .unwrap_or("xeon-phi-7230f");
            (
                format!(
                    "{builtin} (built-in; `heloom profile --out {}` measures this machine)",
                    own.display()
                ),
                heloom_runtime::Profile::load(builtin)?,
            )
        }
    };
    let mut config = ServerConfig::new(dir.clone(), Arc::new(profile));
    config.listen = a.listen;
    if let Some(t) = a.threads {
        anyhow::ensure!(t > 0, "--threads must be at least 1");
        config.threads = t;
    }
    config.max_in_flight = a.max_in_flight;
    if let Some(t) = a.max_tenant_threads {
        anyhow::ensure!(t > 0, "--max-tenant-threads must be at least 1");
        config.tenant_threads = Some(t);
    }
    config.memory_budget = a.memory_budget;
    config.allow_insecure = a.allow_insecure;
    config.allow_remote = a.allow_remote;
    config.scratch = a.scratch;
    config.gpu = a.gpu;
    if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
        config.tls = Some(heloom_serve::TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        });
    }
    if let Some(address) = &a.ray {
        let exe = std::env::current_exe().context("finding the heloom binary for the Ray nodes")?;
        let mut ray = heloom_serve::RayConfig::new(address, exe);
        if let Some(py) = &a.ray_python {
            ray.python = py.clone();
        }
        eprintln!(
            "heloom serve: starting heloom node servers on the Ray cluster at {address} ({} -m \
             heloom.ray_nodes)",
            ray.python.display()
        );
        config.ray = Some(ray);
    }
    anyhow::ensure!(
        a.node_timeout.is_finite() && a.node_timeout >= 3.0,
        "--node-timeout must be at least 3 seconds (a node's job waits are 2 s long polls)"
    );
    if let Some(nodes) = a.local_nodes {
        anyhow::ensure!(nodes > 0, "--local-nodes must be at least 1");
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = a.node_threads.unwrap_or((cores / nodes).max(1));
        anyhow::ensure!(threads > 0, "--node-threads must be at least 1");
        let exe = std::env::current_exe().context("finding the heloom binary for the nodes")?;
        eprintln!(
            "heloom serve: starting {nodes} local node servers of {threads} threads{}",
            if a.pin_nodes { ", pinned" } else { "" }
        );
        config.ray = Some(heloom_serve::RayConfig::local(
            heloom_serve::LocalNodes {
                nodes,
                threads,
                pin: a.pin_nodes,
            },
            exe,
        ));
    }
    if let Some(ray) = config.ray.as_mut() {
        ray.node_timeout = std::time::Duration::from_secs_f64(a.node_timeout);
    }
    config.limits.max_upload_bytes = a.max_upload;
    config.limits.max_queued_jobs = a.max_queued;
    config.limits.max_stored_bytes = a.max_stored;
    let threads = config.threads;
    let on_ray = config.ray.is_some();
    let server = Server::start(config).context("starting heloom serve")?;
    eprintln!(
        "heloom serve: listening on {}://{} (HTTP/1.1 and HTTP/2), data {}, {}, \
         cost profile {name}{}",
        if server.is_tls() { "https" } else { "http" },
        server.addr(),
        dir.display(),
        if on_ray {
            "jobs on the node servers".to_string()
        } else {
            format!("{threads} threads")
        },
        if a.allow_insecure {
            ", INSECURE parameters allowed"
        } else {
            ""
        }
    );
    eprintln!("heloom serve: tokens with `heloom serve token create --data {} --tenant NAME`; Ctrl-C stops", dir.display());
    server.run_until_signal()?;
    eprintln!("heloom serve: stopped (accepted jobs stay queued for the next start)");
    Ok(())
}
