//! `heloom profile`: measures this machine's cost profile (seed 000's Tables 1-5 for heloom) or
//! shows a stored one.

use crate::report::{at_least_one, check_word_bits};
use crate::timing::fmt_sig;
use anyhow::{Context, Result};
use heloom_runtime::profile::{measure_host, MeasureConfig};
use heloom_runtime::{ContentionClass, OpKind, Profile};
use indicatif::{ProgressBar, ProgressStyle};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;

/// Options of `heloom profile`.
#[derive(clap::Args, Debug)]
pub struct ProfileArgs {
    /// Where to write the measured profile (JSON).
    #[arg(long, default_value = "bench/results/profile-host.json")]
    out: PathBuf,
    /// log2 of the ring degree (default 14).
    #[arg(long)]
    log_n: Option<u32>,
    /// Levels of the parameter set: n_q runs over 2..=levels+1 (default 7, n_q up to 8 as in the
    /// paper).
    #[arg(long)]
    levels: Option<usize>,
    /// Word size, 32 or 64 (default 64).
    #[arg(long)]
    word_bits: Option<u32>,
    /// Scaling prime size in bits (default 40 on 64-bit words, 28 on 32-bit words).
    #[arg(long)]
    scale_bits: Option<u32>,
    /// Size of the first prime in bits (default 50 on 64-bit words, 30 on 32-bit words).
    #[arg(long)]
    first_bits: Option<u32>,
    /// Thread budgets 1..=max-threads are measured (default: every core).
    #[arg(long)]
    max_threads: Option<usize>,
    /// Timing samples per table entry, median reported (default 5).
    #[arg(long)]
    reps: Option<usize>,
    /// Print a built-in profile (xeon-phi-7230f) or a profile JSON file instead of measuring.
    #[arg(long, value_name = "NAME")]
    show: Option<String>,
    /// Print the profile as JSON instead of tables.
    #[arg(long)]
    json: bool,
}

/// Runs `heloom profile`.
pub fn run(args: ProfileArgs) -> Result<()> {
    let profile = match &args.show {
        Some(name) => Profile::load(name)?,
        None => {
            let cfg = config(&args)?;
            let p = measure(&cfg)?;
            p.save(&args.out)
                .with_context(|| format!("saving the profile to {}", args.out.display()))?;
            eprintln!("profile written to {}", args.out.display());
            p
        }
    };
    if args.json {
        println!("{}", profile.to_json());
    } else {
        print!("{}", render(&profile));
    }
    Ok(())
}

fn config(args: &ProfileArgs) -> Result<MeasureConfig> {
    let mut cfg = MeasureConfig::default();
    if let Some(w) = args.word_bits {
        check_word_bits(&[w])?;
        cfg.word_bits = w;
        if w == 32 {
            cfg.scale_bits = 28;
            cfg.first_bits = 30;
        }
    }
    if let Some(l) = args.log_n {
        cfg.log_n = l;
    }
    if let Some(l) = args.levels {
        if l == 0 {
            anyhow::bail!("--levels must be at least 1 (n_q runs from 2 to levels + 1)");
        }
        cfg.levels = l;
    }
    if let Some(s) = args.scale_bits {
        cfg.scale_bits = s;
    }
    if let Some(f) = args.first_bits {
        cfg.first_bits = f;
    }
    if let Some(t) = args.max_threads {
        cfg.max_threads = at_least_one("--max-threads", t)?;
    }
    if let Some(r) = args.reps {
        cfg.reps = at_least_one("--reps", r)?;
    }
    Ok(cfg)
}

/// Measures this machine's profile with the default settings (every core, N = 2^14), showing
/// progress on stderr: what `heloom serve --profile measure` uses.
pub fn measure_default() -> Result<Profile> {
    measure(&MeasureConfig::default())
}

fn measure(cfg: &MeasureConfig) -> Result<Profile> {
    let bar = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::new(1);
        pb.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} [{elapsed}] {msg}")?
                .progress_chars("=> "),
        );
        pb
    } else {
        ProgressBar::hidden()
    };
    eprintln!(
        "measuring: N = 2^{}, {}-bit words, n_q = 2..={}, threads 1..={}, {} samples",
        cfg.log_n,
        cfg.word_bits,
        cfg.levels + 1,
        cfg.max_threads,
        cfg.reps
    );
    let start = std::time::Instant::now();
    let p = measure_host(cfg, &mut |done, total, label| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(label.to_string());
    })?;
    bar.finish_and_clear();
    eprintln!("measured in {:.1} s", start.elapsed().as_secs_f64());
    Ok(p)
}

/// A right-aligned table: a header row and labelled rows.
fn table(out: &mut String, corner: &str, header: &[String], rows: &[(String, Vec<String>)]) {
    let w0 = rows
        .iter()
        .map(|(l, _)| l.len())
        .chain([corner.len()])
        .max()
        .unwrap_or(0);
    let w = rows
        .iter()
        .flat_map(|(_, c)| c.iter().map(String::len))
        .chain(header.iter().map(String::len))
        .max()
        .unwrap_or(1);
    let _ = write!(out, "  {corner:<w0$}");
    for h in header {
        let _ = write!(out, " {h:>w$}");
    }
    out.push('\n');
    for (label, cells) in rows {
        let _ = write!(out, "  {label:<w0$}");
        for c in cells {
            let _ = write!(out, " {c:>w$}");
        }
        out.push('\n');
    }
}

/// Tables 2 and 3 style: one op, n_q rows x measured thread columns.
fn op_by_threads(out: &mut String, p: &Profile, op: OpKind) {
    let Some(t) = p.ops.get(&op) else {
        return;
    };
    let header: Vec<String> = t.threads.iter().map(|t| t.to_string()).collect();
    let rows: Vec<(String, Vec<String>)> =
        t.nq.iter()
            .map(|&nq| {
                (
                    format!("n_q={nq}"),
                    t.threads
                        .iter()
                        .map(|&th| fmt_sig(p.op_ms(op, nq, th)))
                        .collect(),
                )
            })
            .collect();
    table(out, "threads:", &header, &rows);
}

/// The profile as the paper's tables.
pub fn render(p: &Profile) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "profile {} — {}\n  N = {}, {}-bit words, n_q up to {}, capacity {} threads, task overhead {} ms",
        p.name,
        p.machine,
        p.n,
        p.word_bits,
        p.max_nq,
        p.capacity,
        fmt_sig(p.task_overhead_ms)
    );

    // Table 1: every op on one thread, by n_q (the union of the ops' rows).
    let mut nqs: Vec<usize> = p.ops.values().flat_map(|t| t.nq.iter().copied()).collect();
    nqs.sort_unstable();
    nqs.dedup();
    let _ = writeln!(
        out,
        "\nTable 1: time per op on one thread [ms] by n_q (level + 1)"
    );
    let header: Vec<String> = nqs.iter().map(|q| q.to_string()).collect();
    let rows: Vec<(String, Vec<String>)> = OpKind::ALL
        .iter()
        .map(|&op| {
            (
                op.name().to_string(),
                nqs.iter().map(|&q| fmt_sig(p.op_ms(op, q, 1))).collect(),
            )
        })
        .collect();
    table(&mut out, "n_q:", &header, &rows);

    let _ = writeln!(out, "\nTable 2: relinearize [ms] by n_q and threads");
    op_by_threads(&mut out, p, OpKind::Relin);
    let _ = writeln!(out, "\nTable 3: rescale [ms] by n_q and threads");
    op_by_threads(&mut out, p, OpKind::Rescale);

    // Contention: slowdown factor by busy threads, one row per class.
    let mut busy: Vec<f64> = p
        .contention
        .values()
        .flat_map(|c| c.iter().map(|&(b, _)| b))
        .collect();
    busy.sort_by(f64::total_cmp);
    busy.dedup();
    let _ = writeln!(
        out,
        "\nContention (Tables 4-5): latency factor by busy threads (ops x threads each)"
    );
    if busy.is_empty() {
        let _ = writeln!(out, "  (no curves: no slowdown)");
    } else {
        let header: Vec<String> = busy.iter().map(|b| fmt_sig(*b)).collect();
        let rows: Vec<(String, Vec<String>)> = [
            (ContentionClass::KeySwitch, "key-switch"),
            (ContentionClass::Other, "other"),
        ]
        .iter()
        .map(|&(class, name)| {
            (
                name.to_string(),
                busy.iter()
                    .map(|&b| format!("{:.3}", p.slowdown(class, b)))
                    .collect(),
            )
        })
        .collect();
        table(&mut out, "busy:", &header, &rows);
    }

    if !p.notes.is_empty() {
        let _ = writeln!(out, "\nNotes:");
        for n in &p.notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_phi_tables() {
        let p = Profile::builtin("xeon-phi-7230f").unwrap();
        let s = render(&p);
        assert!(s.contains("Table 1") && s.contains("Table 2") && s.contains("Table 3"));
        // Relin at n_q = 8 on 1 and 12 threads, rescale at n_q = 2.
        assert!(s.contains("349") && s.contains(" 46\n") && s.contains("n_q=2"));
        assert!(s.contains("key-switch") && s.contains("other"));
    }
}
