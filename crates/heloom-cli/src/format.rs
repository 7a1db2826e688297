//! `heloom format`: look inside a serialized heloom object, and convert version-1 files.
//!
//! `inspect FILE` checks a file the way every loader starts (magic, version, length,
//! checksum) and prints its header: kind, word size, fingerprints, sizes. With `--params P` it
//! also loads the whole object against those parameters (every field checked).
//!
//! `upgrade IN OUT [--params P]` converts a version-1 object (no checksum) to version 2 with
//! every field re-validated; objects other than parameters need the parameters they were
//! made for (a version-1 or version-2 parameter file).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use clap::{Args, Subcommand};
use heloom_ckks::serialize::{peek_header, peek_kind, upgrade_v1, upgrade_v1_params, ObjectKind};
use heloom_ckks::{
    Ciphertext, CkksParameters, Context, EvaluationKeys, Plaintext, PublicKey, SecretKey,
    SwitchingKey,
};
use heloom_math::Word;
use heloom_runtime::TaskGraph;

/// Arguments of `heloom format`.
#[derive(Args, Debug)]
pub struct FormatArgs {
    #[command(subcommand)]
    command: FormatCommand,
}

#[derive(Subcommand, Debug)]
enum FormatCommand {
    /// Check a file's header and checksum and print what it holds; with --params, load it
    /// completely (every field checked).
    Inspect {
        /// The serialized object.
        file: PathBuf,
        /// Parameters (a serialized CkksParameters file) to load the object against.
        #[arg(long)]
        params: Option<PathBuf>,
    },
    /// Convert a format-version-1 object (no checksum) to version 2, re-validating every
    /// field. Convert only files from a source you trust.
    Upgrade {
        /// The version-1 file.
        input: PathBuf,
        /// Where to write the version-2 bytes.
        output: PathBuf,
        /// The parameters the object was made for (version-1 or version-2 file); not needed
        /// to upgrade a parameter file itself.
        #[arg(long)]
        params: Option<PathBuf>,
    },
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Parameters from a version-1 or version-2 file.
fn load_params(path: &Path) -> Result<CkksParameters> {
    let bytes = read(path)?;
    let v = bytes.get(4..6).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let bytes = if v == Some(1) {
        upgrade_v1_params(&bytes)?
    } else {
        bytes
    };
    CkksParameters::from_bytes(&bytes)
        .with_context(|| format!("{} is not a parameter file", path.display()))
}

/// Loads `bytes` completely against `ctx` and says what it is.
fn load_with<W: Word>(ctx: &Arc<Context<W>>, kind: ObjectKind, bytes: &[u8]) -> Result<String> {
    Ok(match kind {
        ObjectKind::Parameters => format!("{}", CkksParameters::from_bytes(bytes)?),
        ObjectKind::Ciphertext => {
            let c = Ciphertext::from_bytes(ctx, bytes)?;
            format!(
                "ciphertext: level {}, {} polynomials, {} slots, scale 2^{:.3}{}",
                c.level(),
                c.size(),
                c.slots(),
                c.scale().log2(),
                if c.is_seeded() { ", seeded" } else { "" }
            )
        }
        ObjectKind::Plaintext => {
            let p = Plaintext::from_bytes(ctx, bytes)?;
            format!(
                "plaintext: level {}, {} slots, scale 2^{:.3}",
                p.level(),
                p.slots(),
                p.scale().log2()
            )
        }
        ObjectKind::PublicKey => {
            PublicKey::from_bytes(ctx, bytes)?;
            "public key".into()
        }
        ObjectKind::SecretKey => {
            SecretKey::from_bytes(ctx, bytes)?;
            "secret key (keep it on the client)".into()
        }
        ObjectKind::SwitchingKey => {
            let k = SwitchingKey::from_bytes(ctx, bytes)?;
            format!("switching key: {:?}, {} digits", k.role(), k.dnum())
        }
        ObjectKind::EvaluationKeys => {
            let k = EvaluationKeys::from_bytes(ctx, bytes)?;
            format!(
                "evaluation keys: relinearization {}, Galois elements {:?}",
                if k.has_relin() { "yes" } else { "no" },
                k.galois_elements()
            )
        }
        ObjectKind::TaskGraph => describe_graph(bytes)?,
    })
}

/// Loads a task graph (it needs no context) and says what it is.
fn describe_graph(bytes: &[u8]) -> Result<String> {
    let g = TaskGraph::from_bytes(bytes)?;
    Ok(format!(
        "task graph {:?}: {} nodes, {} tasks, {} inputs, {} outputs, {} primes in its chain",
        g.name(),
        g.nodes().len(),
        g.tasks().len(),
        g.num_inputs(),
        g.outputs().len(),
        g.moduli().len()
    ))
}

fn inspect(file: &Path, params: Option<&Path>) -> Result<()> {
    let bytes = read(file)?;
    let kind = peek_kind(&bytes).with_context(|| format!("{}", file.display()))?;
    if bytes[4..6] == [1, 0] {
        bail!(
            "{} holds a {kind} in format version 1, which has no checksum: convert it once with `heloom format upgrade {} OUT{}` if you trust where it came from",
            file.display(),
            file.display(),
            if kind == ObjectKind::Parameters { "" } else { " --params PARAMS" }
        );
    }
    let h = peek_header(&bytes).with_context(|| format!("{}", file.display()))?;
    println!(
        "{}: heloom object, format version 2, checksum ok",
        file.display()
    );
    println!("  kind                 {kind}");
    println!("  word size            {} bits", h.word_bits);
    println!("  parameters           {:016x}", h.params_fingerprint);
    println!("  object fingerprint   {:016x}", h.object_fingerprint);
    println!("  payload              {} bytes", h.payload_len);
    let loaded = match (kind, params) {
        (ObjectKind::Parameters, _) => Some(format!("{}", CkksParameters::from_bytes(&bytes)?)),
        (ObjectKind::TaskGraph, _) => Some(describe_graph(&bytes)?),
        (_, Some(p)) => {
            let p = load_params(p)?;
            Some(if p.word_bits() == 32 {
                load_with(&Context::<u32>::new(p)?, kind, &bytes)?
            } else {
                load_with(&Context::<u64>::new(p)?, kind, &bytes)?
            })
        }
        (_, None) => None,
    };
    match loaded {
        Some(what) => println!("loaded, every field checked: {what}"),
        None => println!("(pass --params FILE to load it completely)"),
    }
    Ok(())
}

fn upgrade(input: &Path, output: &Path, params: Option<&Path>) -> Result<()> {
    let bytes = read(input)?;
    let kind = peek_kind(&bytes).with_context(|| format!("{}", input.display()))?;
    let out = match (kind, params) {
        (ObjectKind::Parameters, _) => upgrade_v1_params(&bytes)?,
        (_, Some(p)) => {
            let p = load_params(p)?;
            if p.word_bits() == 32 {
                upgrade_v1(&*Context::<u32>::new(p)?, &bytes)?
            } else {
                upgrade_v1(&*Context::<u64>::new(p)?, &bytes)?
            }
        }
        (_, None) => bail!(
            "{} holds a {kind}: pass --params with the parameters it was made for",
            input.display()
        ),
    };
    std::fs::write(output, &out).with_context(|| format!("cannot write {}", output.display()))?;
    println!(
        "{} ({kind}, version 1) -> {} (version 2, {} bytes)",
        input.display(),
        output.display(),
        out.len()
    );
    Ok(())
}

/// Runs `heloom format`.
pub fn run(args: &FormatArgs) -> Result<()> {
    match &args.command {
        FormatCommand::Inspect { file, params } => inspect(file, params.as_deref()),
        FormatCommand::Upgrade {
            input,
            output,
            params,
        } => upgrade(input, output, params.as_deref()),
    }
}
