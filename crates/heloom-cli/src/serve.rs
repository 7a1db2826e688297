//! `heloom serve`: the multi-tenant service's administration (its durable state in a data
//! directory; see heloom-serve).

use anyhow::Result;
use clap::{Args, Subcommand};
use heloom_serve::{default_data_dir, State};
use std::path::PathBuf;

/// Arguments of `heloom serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(subcommand)]
    command: ServeCommand,
}

#[derive(Subcommand, Debug)]
enum ServeCommand {
    /// Bearer tokens of the service's tenants.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
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
    match &args.command {
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
