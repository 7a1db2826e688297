//! The server process: the HTTP front end (HTTP/1.1 and HTTP/2, one port; TLS with rustls
//! when given a certificate, HTTP/2 negotiated by ALPN) over the worker.

use crate::api::{router, AppState, Limits};
use crate::metrics::Metrics;
use crate::objects::Contexts;
use crate::worker::{Worker, WorkerConfig};
use crate::{Result, ServeError, State};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How `heloom serve` runs.
#[derive(Clone)]
pub struct ServerConfig {
    /// The data directory (database, objects, spill files).
    pub data_dir: PathBuf,
    /// Where to listen; port 0 picks a free port ([`Server::addr`] tells which).
    pub listen: SocketAddr,
    /// Threads for HE tasks.
    pub threads: usize,
    /// Jobs in the executor at once (0: threads + 1, or threads / 2 + 1 with a memory budget).
    pub max_in_flight: usize,
    /// Most threads one tenant's tasks hold at once (`None`: no cap).
    pub tenant_threads: Option<usize>,
    /// Memory budget of the key store, bytes (`None`: unlimited).
    pub memory_budget: Option<u64>,
    /// Accept parameters below 128-bit security (tests only).
    pub allow_insecure: bool,
    /// Request limits and quotas.
    pub limits: Limits,
    /// The scheduler's cost model.
    pub model: Arc<dyn heloom_runtime::CostModel>,
    /// Listen on an address other than loopback without TLS (behind a TLS-terminating
    /// proxy). With [`ServerConfig::tls`] any address is allowed.
    pub allow_remote: bool,
    /// Serve HTTPS with this certificate chain and private key (PEM files).
    pub tls: Option<TlsFiles>,
    /// Run jobs on the node servers of a Ray cluster (`--ray`) instead of in this process.
    pub ray: Option<crate::RayConfig>,
    /// The data directory is scratch space: nothing is synced to the disk
    /// ([`State::open_scratch`]). For node servers behind a front, which keeps the records.
    pub scratch: bool,
    /// The GPU that runs jobs beside the CPU lanes (`Off` here; `heloom serve` defaults to
    /// `Auto`).
    pub gpu: crate::gpu::GpuChoice,
}

/// A certificate chain and its private key, PEM.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The certificate chain (leaf first).
    pub cert: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// A TLS acceptor for `files`: TLS 1.2 and 1.3 (rustls, AWS-LC), HTTP/2 and HTTP/1.1 by ALPN.
fn tls_acceptor(files: &TlsFiles) -> Result<tokio_rustls::TlsAcceptor> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |what: &str, path: &std::path::Path, e: String| {
        ServeError::InvalidRequest(format!(
            "TLS {what} {}: {e}; give PEM files (--tls-cert chain, --tls-key private key)",
            path.display()
        ))
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| bad("certificate", &files.cert, e.to_string()))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| bad("certificate", &files.cert, e.to_string()))?;
    if certs.is_empty() {
        return Err(bad(
            "certificate",
            &files.cert,
            "no certificate in it".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| bad("key", &files.key, e.to_string()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("setup for", &files.cert, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| bad("certificate and key", &files.cert, e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("data_dir", &self.data_dir)
            .field("listen", &self.listen)
            .field("threads", &self.threads)
            .finish()
    }
}

impl ServerConfig {
    /// Defaults: `data_dir`, 127.0.0.1:8787, every core, no memory budget, secure parameters
    /// only, the given cost model.
    pub fn new(data_dir: PathBuf, model: Arc<dyn heloom_runtime::CostModel>) -> Self {
        Self {
            data_dir,
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_in_flight: 0,
            tenant_threads: None,
            memory_budget: None,
            allow_insecure: false,
            limits: Limits::default(),
            model,
            allow_remote: false,
            tls: None,
            ray: None,
            scratch: false,
            gpu: crate::gpu::GpuChoice::Off,
        }
    }
}

/// A running server; dropping it stops it (accepted jobs stay in the database and run after
/// the next start).
pub struct Server {
    addr: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    runtime: Option<tokio::runtime::Runtime>,
    worker: Option<Worker>,
    state: Arc<State>,
    tls: bool,
    /// Checkpoints the database's log off the committing threads; stopped after the worker.
    _checkpointer: crate::Checkpointer,
    /// The data directory's lock (`DIR/serve.lock`), held while the server runs: released
    /// last, when the worker and the listener are gone.
    _lock: std::fs::File,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

/// Takes the data directory's lock: one server per directory (two would run the same jobs and
/// append to the same segments). `heloom serve token create` does not take it.
fn lock_data_dir(dir: &std::path::Path) -> Result<std::fs::File> {
    let path = dir.join("serve.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| ServeError::DataDir {
            path: path.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(ServeError::DataDirInUse {
            path: dir.to_path_buf(),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(ServeError::DataDir { path, source }),
    }
}

fn io_err(what: &str, e: std::io::Error) -> ServeError {
    ServeError::InvalidRequest(format!("{what}: {e}"))
}

impl Server {
    /// Opens the state in the data directory, starts the worker (jobs left running by a
    /// previous process are queued again) and listens.
    pub fn start(config: ServerConfig) -> Result<Self> {
        if !config.listen.ip().is_loopback() && !config.allow_remote && config.tls.is_none() {
            return Err(ServeError::InvalidRequest(format!(
                "{} is not a loopback address: tokens and ciphertexts would cross the network in \
                 the clear; give --tls-cert and --tls-key, or --allow-remote behind a \
                 TLS-terminating proxy",
                config.listen
            )));
        }
        let tls = config.tls.as_ref().map(tls_acceptor).transpose()?;
        if config.memory_budget.is_some() {
            // Under a budget, resident memory must follow what is in use: freed pages go back
            // to the OS instead of staying mapped for reuse.
            heloom_pool::return_freed_memory();
        }
        let state = Arc::new(if config.scratch {
            State::open_scratch(&config.data_dir)?
        } else {
            State::open(&config.data_dir)?
        });
        let lock = lock_data_dir(state.dir())?;
        state.clean_incoming();
        let requeued = state.verify_segments()?;
        if requeued > 0 {
            eprintln!("heloom serve: {requeued} jobs queued again (results lost in a crash)");
        }
        state.reclaim_segments()?;
        let checkpointer = state.start_checkpointer()?;
        let contexts = Arc::new(Contexts::default());
        let metrics = Arc::new(Metrics::default());
        let worker = Worker::start(
            Arc::clone(&state),
            Arc::clone(&contexts),
            Arc::clone(&metrics),
            &WorkerConfig {
                model: Arc::clone(&config.model),
                threads: config.threads,
                max_in_flight: config.max_in_flight,
                tenant_threads: config.tenant_threads,
                memory_budget: config.memory_budget,
                allow_insecure: config.allow_insecure,
                ray: config.ray.clone(),
                gpu: config.gpu,
            },
        )?;
        let app = AppState {
            state: Arc::clone(&state),
            contexts,
            worker: Arc::clone(worker.shared()),
            metrics,
            limits: config.limits.clone(),
            allow_insecure: config.allow_insecure,
        };
        let listener = std::net::TcpListener::bind(config.listen)
            .map_err(|e| io_err(&format!("listening on {}", config.listen), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| io_err("reading the listening address", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| io_err("setting up the listener", e))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("heloom-serve-io")
            .enable_all()
            .build()
            .map_err(|e| io_err("starting the I/O runtime", e))?;
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let router = router(app);
        let header_timeout = config.limits.idle_timeout;
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener)
                .map_err(|e| io_err("setting up the listener", e))?
        };
        runtime.spawn(accept_loop(listener, router, stop_rx, header_timeout, tls));
        Ok(Self {
            addr,
            stop,
            runtime: Some(runtime),
            worker: Some(worker),
            state,
            tls: config.tls.is_some(),
            _checkpointer: checkpointer,
            _lock: lock,
        })
    }

    /// Whether the server speaks HTTPS.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's state (tokens, jobs, objects).
    pub fn state(&self) -> &Arc<State> {
        &self.state
    }

    /// Blocks until Ctrl-C or SIGTERM, then stops.
    pub fn run_until_signal(self) -> Result<()> {
        if let Some(rt) = &self.runtime {
            rt.block_on(async {
                #[cfg(unix)]
                {
                    use tokio::signal::unix::{signal, SignalKind};
                    match signal(SignalKind::terminate()) {
                        Ok(mut term) => {
                            tokio::select! {
                                _ = tokio::signal::ctrl_c() => {}
                                _ = term.recv() => {}
                            }
                        }
                        Err(_) => {
                            let _ = tokio::signal::ctrl_c().await;
                        }
                    }
                }
                #[cfg(not(unix))]
                {
                    let _ = tokio::signal::ctrl_c().await;
                }
            });
        }
        drop(self);
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        // The worker first: jobs in flight finish or stay `running` for the next start.
        self.worker.take();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
    header_timeout: Duration,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    loop {
        tokio::select! {
            r = listener.accept() => {
                let Ok((sock, _)) = r else { continue };
                let _ = sock.set_nodelay(true);
                let svc = hyper_util::service::TowerToHyperService::new(router.clone());
                let stop = stop.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    let mut b = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    // An HTTP/1.1 client that does not finish its headers in time is dropped
                    // (slow-request attacks); HTTP/2 connections are kept honest by
                    // keep-alive pings, and uploads by the idle timeout per chunk.
                    b.http1()
                        .timer(TokioTimer::new())
                        .header_read_timeout(header_timeout);
                    b.http2()
                        .timer(TokioTimer::new())
                        .keep_alive_interval(Some(Duration::from_secs(30)))
                        .max_concurrent_streams(256);
                    let mut stop = stop;
                    match tls {
                        None => {
                            let conn = b.serve_connection_with_upgrades(TokioIo::new(sock), svc);
                            tokio::select! {
                                _ = conn => {}
                                _ = stop.changed() => {}
                            }
                        }
                        Some(acceptor) => {
                            // A handshake that does not finish in time is dropped, like slow
                            // headers.
                            let Ok(Ok(stream)) =
                                tokio::time::timeout(header_timeout, acceptor.accept(sock)).await
                            else {
                                return;
                            };
                            let conn = b.serve_connection_with_upgrades(TokioIo::new(stream), svc);
                            tokio::select! {
                                _ = conn => {}
                                _ = stop.changed() => {}
                            }
                        }
                    }
                });
            }
            _ = stop.changed() => break,
        }
    }
}
