//! Client and server of the private longest-match search, independent of the transport.
//!
//! See the module documentation of [`crate::genome`] for the protocol, the encoding and the
//! privacy argument. The server's per-site tables come from a [`TableSource`], so they can live
//! in memory or in a tiered store.

use super::pbwt::{all_answers, result_from_counts, MatchResult, Pbwt};
use super::wire::{Header, Message, Mode};
use crate::error::{AppError, Result};
use heloom_ckks::{
    keygen, Ciphertext, CkksParameters, Complex64, Context, Decryptor, Encryptor, EvaluationKeys,
    Evaluator, Plaintext, PublicKey, SecretKey,
};
use heloom_math::automorphism::galois_element_for_step;
use heloom_math::{Form, RnsPoly};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Ring degree `N = 2^13`.
pub const RING_DEGREE: usize = 1 << 13;
/// Slots, and the modulus `m` of the index arithmetic: indices are the roots of unity
/// `w^v`, `w = exp(2 pi i / m)`, so a rotation of the slots is exactly a shift mod `m`.
pub const SLOTS: usize = RING_DEGREE / 2;
/// Longest non-interactive query: `2^12` answers fill the slots.
pub const MAX_NONINTERACTIVE: usize = 12;
/// `log2 K`: the blinding factor `w^r'` is applied as the Gaussian integer
/// `round(K w^r')`, exact to `2^-36` in angle.
pub const BLIND_SCALE_BITS: i32 = 36;
/// Standard deviation of the flooding error in a decoded slot (relative to the unit value);
/// indices are `pi / m = 7.7e-4` apart in angle, 15 standard deviations.
pub const FLOOD_SLOT_STD: f64 = 5e-5;

/// The CKKS parameters of the search: `N = 2^13`, three 50-bit primes plus one 50-bit special
/// prime (`log QP = 200`, 128-bit secure per the HE standard), fresh scale `2^55`.
pub fn parameters() -> Result<CkksParameters> {
    Ok(CkksParameters::builder(RING_DEGREE)
        .prime_bits(vec![50, 50, 50])
        .special_bits(50)
        .scale_bits(55)
        .build()?)
}

/// `w^v`.
pub fn root(v: usize) -> Complex64 {
    Complex64::from_polar(
        1.0,
        2.0 * std::f64::consts::PI * (v % SLOTS) as f64 / SLOTS as f64,
    )
}

/// The index `v` with `z ~ w^v` (nearest root of unity) and the angle error in radians.
pub fn read_root(z: Complex64) -> (usize, f64) {
    let t = z.arg() * SLOTS as f64 / (2.0 * std::f64::consts::PI);
    let v = t.round();
    (
        v.rem_euclid(SLOTS as f64) as usize % SLOTS,
        (t - v).abs() * 2.0 * std::f64::consts::PI / SLOTS as f64,
    )
}

/// The encoded tables of one site (or of the non-interactive answers): the plaintexts `A` and
/// `conj(B)` at the top level, scale `q_L`, see the module documentation.
#[derive(Clone, Debug)]
pub struct SiteTables {
    /// `A[j] = (T^0[j] - i T^1[j]) / 2`.
    pub a: Plaintext<u64>,
    /// `conj(B)[j] = (conj T^0[j] - i conj T^1[j]) / 2`, absent for a single-table look-up.
    pub b_conj: Option<Plaintext<u64>>,
}

impl SiteTables {
    /// Memory held, bytes.
    pub fn memory_bytes(&self) -> usize {
        let p = |x: &Plaintext<u64>| x.poly().num_limbs() * x.poly().n() * 8;
        p(&self.a) + self.b_conj.as_ref().map_or(0, p)
    }
}

/// Where the server gets a site's tables during a query.
pub trait TableSource: Send + Sync {
    /// The tables of site `k` (or key `k` for the non-interactive tables).
    fn get(&self, k: u64) -> Result<Arc<SiteTables>>;
    /// The order of future `get`s (prefetch hint); the default ignores it.
    fn set_access_order(&self, _keys: &[u64]) {}
    /// Statistics as JSON (`null` when there are none).
    fn stats(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// Tables held in memory.
#[derive(Debug, Default)]
pub struct MemoryTables(HashMap<u64, Arc<SiteTables>>);

impl TableSource for MemoryTables {
    fn get(&self, k: u64) -> Result<Arc<SiteTables>> {
        self.0
            .get(&k)
            .cloned()
            .ok_or_else(|| AppError::Invalid(format!("no tables for key {k}")))
    }
}

/// Makes the table source of a session (in memory by default; the server may put the tables
/// in a tiered store). Arguments: the encoded tables as they are made, the order the protocol
/// will read them in, and their total size in bytes (the session's working set).
pub type TableSink = dyn Fn(
        &mut dyn Iterator<Item = Result<(u64, SiteTables)>>,
        &[u64],
        u64,
    ) -> Result<Box<dyn TableSource>>
    + Send
    + Sync;

/// Encodes `A`, `conj(B)` from the index tables `t0`, `t1` (values `0..m`, or `None` entries
/// left at `w^0`), or a single table `t0` when `t1` is `None`.
fn encode_tables(ctx: &Context<u64>, t0: &[usize], t1: Option<&[usize]>) -> Result<SiteTables> {
    let level = ctx.max_level();
    let scale = ctx.params().moduli()[level] as f64;
    let mut a = vec![Complex64::new(0.0, 0.0); SLOTS];
    let mut b = vec![Complex64::new(0.0, 0.0); SLOTS];
    let i = Complex64::new(0.0, 1.0);
    for j in 0..SLOTS {
        match t1 {
            Some(t1) => {
                let (x0, x1) = (
                    root(*t0.get(j).unwrap_or(&0)),
                    root(*t1.get(j).unwrap_or(&0)),
                );
                a[j] = (x0 - i * x1) / 2.0;
                b[j] = (x0.conj() - i * x1.conj()) / 2.0;
            }
            None => {
                if let Some(&v) = t0.get(j) {
                    a[j] = root(v);
                }
            }
        }
    }
    Ok(SiteTables {
        a: ctx.encode_complex_at(&a, level, scale)?,
        b_conj: match t1 {
            Some(_) => Some(ctx.encode_complex_at(&b, level, scale)?),
            None => None,
        },
    })
}

/// The server: the panel's PBWT and the CKKS context.
pub struct Server {
    pbwt: Arc<Pbwt>,
    ctx: Arc<Context<u64>>,
    sink: Box<TableSink>,
    /// Seconds spent building the PBWT.
    pub pbwt_s: f64,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("pbwt_s", &self.pbwt_s)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A server for `panel` keeping its tables in memory.
    pub fn new(panel: &super::panel::Panel) -> Result<Self> {
        let t = Instant::now();
        let pbwt = Arc::new(Pbwt::build(panel)?);
        let pbwt_s = t.elapsed().as_secs_f64();
        if pbwt.haplotypes() + 1 > SLOTS {
            return Err(AppError::Invalid(format!(
                "{} haplotypes: the encrypted search handles at most {} (indices 0..=M in {SLOTS} slots)",
                pbwt.haplotypes(),
                SLOTS - 1
            )));
        }
        let ctx = Context::<u64>::new(parameters()?)?;
        Ok(Self {
            pbwt,
            ctx,
            sink: Box::new(|tables, _, _| {
                let map = tables
                    .map(|r| r.map(|(k, t)| (k, Arc::new(t))))
                    .collect::<Result<HashMap<_, _>>>()?;
                Ok(Box::new(MemoryTables(map)))
            }),
            pbwt_s,
        })
    }

    /// Puts each session's tables where `sink` says (a tiered store, for instance).
    pub fn with_table_sink(mut self, sink: Box<TableSink>) -> Self {
        self.sink = sink;
        self
    }

    /// The PBWT.
    pub fn pbwt(&self) -> &Pbwt {
        &self.pbwt
    }

    /// The CKKS context.
    pub fn context(&self) -> &Arc<Context<u64>> {
        &self.ctx
    }

    /// A fresh session (one client).
    pub fn session(&self) -> ServerSession<'_> {
        ServerSession {
            server: self,
            active: None,
            round_s: Vec::new(),
            init_s: 0.0,
        }
    }
}

struct Active {
    ev: Evaluator<u64>,
    enc: Encryptor<u64>,
    pk: PublicKey<u64>,
    expect: (u64, u64),
    mode: Mode,
    start: usize,
    length: usize,
    round: usize,
    shift: usize,
    tables: Box<dyn TableSource>,
    rng: ChaCha20Rng,
}

/// One client's session on the server: a state machine fed with messages.
pub struct ServerSession<'a> {
    server: &'a Server,
    active: Option<Active>,
    round_s: Vec<f64>,
    init_s: f64,
}

impl std::fmt::Debug for ServerSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSession")
            .field("rounds", &self.round_s.len())
            .finish_non_exhaustive()
    }
}

impl ServerSession<'_> {
    /// `(fingerprint, session)` frames must carry, once the session has started.
    pub fn expect(&self) -> Option<(u64, u64)> {
        self.active.as_ref().map(|a| a.expect)
    }

    /// Handles one message and returns the answer (an error is the caller's to report; the
    /// session state is unchanged by a refused message).
    pub fn handle(&mut self, msg: Message, header: &Header) -> Result<Message> {
        match msg {
            Message::Hello {
                params,
                public_key,
                eval_keys,
                mode,
                start,
                length,
            } => {
                if self.active.is_some() {
                    return Err(AppError::Protocol("a second Hello in one session".into()));
                }
                let t = Instant::now();
                let a = self.start(
                    header,
                    &params,
                    &public_key,
                    &eval_keys,
                    mode,
                    start,
                    length,
                )?;
                self.init_s = t.elapsed().as_secs_f64();
                self.active = Some(a);
                Ok(Message::HelloAck {
                    haplotypes: self.server.pbwt.haplotypes() as u32,
                    sites: self.server.pbwt.sites() as u32,
                    init_s: self.init_s,
                })
            }
            Message::Query { round, cts } => {
                let t = Instant::now();
                let a = self
                    .active
                    .as_mut()
                    .ok_or_else(|| AppError::Protocol("a Query before Hello".into()))?;
                let out = a.answer(&self.server.ctx, round as usize, &cts)?;
                let server_s = t.elapsed().as_secs_f64();
                self.round_s.push(server_s);
                Ok(Message::Reply {
                    round,
                    cts: out,
                    server_s,
                })
            }
            Message::Finish => {
                let a = self
                    .active
                    .as_ref()
                    .ok_or_else(|| AppError::Protocol("Finish before Hello".into()))?;
                let json = serde_json::json!({
                    "pbwt_s": self.server.pbwt_s,
                    "init_s": self.init_s,
                    "round_s": self.round_s,
                    "peak_memory_bytes": crate::cryptonets::evaluate::peak_memory(),
                    "store": a.tables.stats(),
                });
                Ok(Message::Stats {
                    json: json.to_string(),
                })
            }
            other => Err(AppError::Protocol(format!(
                "the server does not take {} messages",
                other.name()
            ))),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn start(
        &self,
        header: &Header,
        params: &[u8],
        public_key: &[u8],
        eval_keys: &[u8],
        mode: Mode,
        start: u32,
        length: u32,
    ) -> Result<Active> {
        let ctx = &self.server.ctx;
        let params = CkksParameters::from_bytes(params)?;
        if params.fingerprint() != ctx.fingerprint() || header.fingerprint != ctx.fingerprint() {
            return Err(AppError::Protocol(format!(
                "the client's CKKS parameters (fingerprint {:016x}) are not the server's ({:016x})",
                params.fingerprint(),
                ctx.fingerprint()
            )));
        }
        let session = super::panel::fnv1a64(public_key);
        if header.session != session {
            return Err(AppError::Protocol(
                "Hello's session is not its public key's hash".into(),
            ));
        }
        let pk = PublicKey::from_bytes(ctx, public_key)?;
        let keys = EvaluationKeys::from_bytes(ctx, eval_keys)?;
        let (start, length) = (start as usize, length as usize);
        let pbwt = &self.server.pbwt;
        if length == 0 || start.checked_add(length).is_none_or(|e| e > pbwt.sites()) {
            return Err(AppError::Invalid(format!(
                "query of length {length} from site {start} does not fit in {} sites",
                pbwt.sites()
            )));
        }
        // Tables are encoded one site at a time and handed to the sink as they come, so a
        // store with a budget never holds more than its budget (plus one site).
        let one = ctx.n() * (ctx.max_level() + 1) * 8;
        let tables = match mode {
            Mode::Interactive => {
                let order: Vec<u64> = (start..start + length).map(|k| k as u64).collect();
                let mut it = (start..start + length).map(|k| {
                    let t =
                        encode_tables(ctx, &pbwt.rank_table(k, 0), Some(&pbwt.rank_table(k, 1)))?;
                    Ok((k as u64, t))
                });
                (self.server.sink)(&mut it, &order, (2 * one * length) as u64)?
            }
            Mode::NonInteractive => {
                if length > MAX_NONINTERACTIVE {
                    return Err(AppError::Invalid(format!(
                        "the non-interactive mode takes queries of at most {MAX_NONINTERACTIVE} sites, not {length}"
                    )));
                }
                let ans = all_answers(pbwt, start, length)?;
                let len: Vec<usize> = ans.iter().map(|r| r.length).collect();
                let count: Vec<usize> = ans.iter().map(|r| r.count).collect();
                let mut it = [(0u64, len), (1, count)]
                    .into_iter()
                    .map(|(k, t)| Ok((k, encode_tables(ctx, &t, None)?)));
                (self.server.sink)(&mut it, &[0, 1], 2 * one as u64)?
            }
        };
        let threads = heloom_pool::Threads::new(1.max(heloom_pool::cores() / 2));
        Ok(Active {
            ev: Evaluator::new(ctx, Arc::new(keys))?.with_threads(threads),
            enc: Encryptor::new(ctx),
            pk,
            expect: (ctx.fingerprint(), session),
            mode,
            start,
            length,
            round: 0,
            shift: 0,
            tables,
            rng: ChaCha20Rng::from_seed(heloom_math::sampler::fresh_seed()),
        })
    }
}

impl Active {
    fn answer(
        &mut self,
        ctx: &Arc<Context<u64>>,
        round: usize,
        cts: &[Vec<u8>],
    ) -> Result<Vec<Vec<u8>>> {
        let rounds = if self.mode == Mode::Interactive {
            self.length
        } else {
            1
        };
        if round != self.round || round >= rounds {
            return Err(AppError::Protocol(format!(
                "Query for round {round}, the server expects round {} of {rounds}",
                self.round
            )));
        }
        let want = if self.mode == Mode::Interactive { 2 } else { 1 };
        if cts.len() != want {
            return Err(AppError::Protocol(format!(
                "{} ciphertexts in a Query, {want} expected",
                cts.len()
            )));
        }
        let cts: Vec<Ciphertext<u64>> = cts
            .iter()
            .map(|b| Ciphertext::from_bytes(ctx, b))
            .collect::<std::result::Result<_, _>>()?;
        for ct in &cts {
            if ct.level() != ctx.max_level() || ct.size() != 2 {
                return Err(AppError::Protocol(format!(
                    "a query ciphertext must be fresh (level {}, 2 polynomials), got level {} with {}",
                    ctx.max_level(),
                    ct.level(),
                    ct.size()
                )));
            }
        }
        let out = match self.mode {
            Mode::Interactive => {
                let tables = self.tables.get((self.start + round) as u64)?;
                let blind = self.rng.gen_range(0..SLOTS);
                let prepared = Prepared::new(ctx, &tables, self.shift, blind)?;
                let res = self.pair(ctx, &prepared, &prepared, &cts[0], &cts[1])?;
                self.shift = blind;
                res
            }
            Mode::NonInteractive => {
                let len = Prepared::new(ctx, &*self.tables.get(0)?, 0, 0)?;
                let count = Prepared::new(ctx, &*self.tables.get(1)?, 0, 0)?;
                self.pair(ctx, &len, &count, &cts[0], &cts[0])?
            }
        };
        self.round += 1;
        Ok(out)
    }

    /// Two look-ups in parallel (one per core of a two-core budget).
    fn pair(
        &self,
        ctx: &Arc<Context<u64>>,
        p: &Prepared,
        q: &Prepared,
        x: &Ciphertext<u64>,
        y: &Ciphertext<u64>,
    ) -> Result<Vec<Vec<u8>>> {
        let (rx, ry) = std::thread::scope(|s| {
            let h = s.spawn(|| lookup(ctx, &self.ev, &self.enc, &self.pk, p, x));
            let ry = lookup(ctx, &self.ev, &self.enc, &self.pk, q, y);
            let rx = h
                .join()
                .unwrap_or_else(|_| Err(AppError::Invalid("look-up thread panicked".into())));
            (rx, ry)
        });
        Ok(vec![rx?.to_bytes(), ry?.to_bytes()])
    }
}

/// A round's tables: `A` and `conj(B)` rotated right by the previous blinding `shift`
/// (a permutation of the NTT points, no key needed) and multiplied by the Gaussian integers
/// `round(K w^blind)` and `round(K w^-blind)`.
pub struct Prepared {
    a: RnsPoly<u64>,
    b: Option<RnsPoly<u64>>,
    scale: f64,
}

impl Prepared {
    /// Prepares `tables` for a round with the given shift and blinding.
    pub fn new(
        ctx: &Context<u64>,
        tables: &SiteTables,
        shift: usize,
        blind: usize,
    ) -> Result<Self> {
        let level = ctx.max_level();
        let basis = ctx.q_basis(level)?;
        let k = 2f64.powi(BLIND_SCALE_BITS);
        let g = galois_element_for_step(ctx.n(), -((shift % SLOTS) as i64));
        let perm = ctx.permutation(g)?;
        let prep = |pt: &Plaintext<u64>, c: Complex64| -> Result<RnsPoly<u64>> {
            if pt.level() != level {
                return Err(AppError::Invalid("site tables at the wrong level".into()));
            }
            let mut out = basis.zero(Form::Ntt);
            for i in 0..out.num_limbs() {
                perm.apply(pt.poly().limb(i), out.limb_mut(i))?;
            }
            let mut cp = ctx.encoder().encode_constant(c, k, basis)?;
            basis.forward(&mut cp)?;
            basis.mul_assign(&mut out, &cp)?;
            Ok(out)
        };
        let w = root(blind);
        Ok(Self {
            a: prep(&tables.a, w)?,
            b: match &tables.b_conj {
                Some(b) => Some(prep(b, w.conj())?),
                None => None,
            },
            scale: tables.a.scale() * k,
        })
    }
}

/// One homomorphic look-up: `sum_j (A[j] u_j + B[j] conj(u_j)) w^blind` in every slot, where
/// `u` is the client's one-hot vector, flooded. See the module documentation.
pub fn lookup(
    ctx: &Arc<Context<u64>>,
    ev: &Evaluator<u64>,
    enc: &Encryptor<u64>,
    pk: &PublicKey<u64>,
    p: &Prepared,
    ct: &Ciphertext<u64>,
) -> Result<Ciphertext<u64>> {
    let z = lookup_unflooded(ctx, ev, p, ct)?;
    let flood_bits = (z.scale().log2() + (FLOOD_SLOT_STD * (3.0 / ctx.n() as f64).sqrt()).log2())
        .floor()
        .max(1.0) as u32;
    let f = enc.encrypt_zero_flooded(z.level(), z.scale(), SLOTS, flood_bits, pk)?;
    Ok(ev.add(&z, &f)?)
}

/// [`lookup`] without the re-randomization and flooding: for measuring the computation's own
/// error only; its result reveals more than the answer and must never be sent.
pub fn lookup_unflooded(
    ctx: &Arc<Context<u64>>,
    ev: &Evaluator<u64>,
    p: &Prepared,
    ct: &Ciphertext<u64>,
) -> Result<Ciphertext<u64>> {
    let level = ct.level();
    let basis = ctx.q_basis(level)?;
    let times = |t: &RnsPoly<u64>| -> Result<Ciphertext<u64>> {
        let polys = ct
            .polys()
            .iter()
            .map(|c| basis.mul(c, t))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let c = ctx.ciphertext_from_polys(polys, level, ct.scale() * p.scale, SLOTS)?;
        Ok(ev.rescale(&c)?)
    };
    let mut z = times(&p.a)?;
    if let Some(b) = &p.b {
        let y = times(b)?;
        z = ev.add(&z, &ev.conjugate(&y)?)?;
    }
    Ok(ev.rotate_and_sum(&z, SLOTS)?)
}

/// The client: keys, and the query.
pub struct Client {
    ctx: Arc<Context<u64>>,
    sk: SecretKey<u64>,
    pk: PublicKey<u64>,
    eval_keys: EvaluationKeys<u64>,
    enc: Encryptor<u64>,
    dec: Decryptor<u64>,
    session: u64,
    largest_error: std::sync::Mutex<f64>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client with fresh keys: secret, public, and Galois keys for the rotations by
    /// `1, 2, .., m/2` and conjugation.
    pub fn new() -> Result<Self> {
        let ctx = Context::<u64>::new(parameters()?)?;
        let steps = Evaluator::<u64>::rotate_and_sum_steps(SLOTS);
        let keys = keygen(&ctx, &steps, true)?;
        let dec = Decryptor::new(&ctx, &keys.secret_key)?;
        let session = super::panel::fnv1a64(&keys.public_key.to_bytes());
        Ok(Self {
            enc: Encryptor::new(&ctx),
            dec,
            sk: keys.secret_key,
            pk: keys.public_key,
            eval_keys: keys.evaluation_keys,
            ctx,
            session,
            largest_error: std::sync::Mutex::new(0.0),
        })
    }

    /// `(fingerprint, session)` of this client's messages.
    pub fn expect(&self) -> (u64, u64) {
        (self.ctx.fingerprint(), self.session)
    }

    /// The Hello message.
    pub fn hello(&self, mode: Mode, start: usize, length: usize) -> Result<Message> {
        let (start, length) = (
            u32::try_from(start).map_err(|_| AppError::Invalid("start too large".into()))?,
            u32::try_from(length).map_err(|_| AppError::Invalid("length too large".into()))?,
        );
        Ok(Message::Hello {
            params: self.ctx.params().to_bytes(),
            public_key: self.pk.to_bytes(),
            eval_keys: self.eval_keys.to_bytes(),
            mode,
            start,
            length,
        })
    }

    /// Encrypts the one-hot vector with `value` at slot `index` (secret-key encryption:
    /// seeded, half size).
    pub fn encrypt_one_hot(&self, index: usize, value: Complex64) -> Result<Vec<u8>> {
        let mut v = vec![Complex64::new(0.0, 0.0); SLOTS];
        v[index % SLOTS] = value;
        Ok(self.enc.encrypt_complex_symmetric(&v, &self.sk)?.to_bytes())
    }

    /// The query index `w^v` a result ciphertext decrypts to (slot 0).
    pub fn decrypt_index(&self, bytes: &[u8]) -> Result<usize> {
        let ct = Ciphertext::from_bytes(&self.ctx, bytes)?;
        let z = *self
            .dec
            .decrypt_complex(&ct)?
            .first()
            .ok_or_else(|| AppError::Protocol("a result ciphertext without slots".into()))?;
        let (v, err) = read_root(z);
        if let Ok(mut e) = self.largest_error.lock() {
            *e = e.max(err);
        }
        if (z.norm() - 1.0).abs() > 0.01 {
            return Err(AppError::Protocol(format!(
                "a result decrypted to |z| = {:.4}, not a root of unity (wrong keys or tables?)",
                z.norm()
            )));
        }
        Ok(v)
    }

    /// Largest angle error seen when reading a result (radians; indices are `2 pi / m` apart).
    pub fn largest_error(&self) -> f64 {
        self.largest_error.lock().map_or(f64::NAN, |e| *e)
    }
}

/// Moves messages between a client and a server.
pub trait Transport {
    /// Sends `msg` and returns the server's answer; an `Error` answer becomes
    /// [`AppError::Protocol`].
    fn exchange(&mut self, msg: &Message, expect: (u64, u64)) -> Result<Message>;
    /// Bytes sent and received by the last exchange (whole frames).
    fn last_bytes(&self) -> (usize, usize);
}

/// In-process transport: frames are encoded and decoded as on a socket.
pub struct LocalTransport<'a> {
    session: ServerSession<'a>,
    last: (usize, usize),
}

impl<'a> LocalTransport<'a> {
    /// A transport to a new session of `server`.
    pub fn new(server: &'a Server) -> Self {
        Self {
            session: server.session(),
            last: (0, 0),
        }
    }

    /// Delivers one raw frame to the server session and returns the raw answer frame (the
    /// server's side of a socket: refusals become `Error` frames).
    pub fn deliver(&mut self, frame: &[u8]) -> Vec<u8> {
        serve_frame(&mut self.session, frame).0
    }
}

/// The server's handling of one frame: the answer frame, and whether the session goes on
/// (`false` after a refusal or `Finish`).
pub fn serve_frame(session: &mut ServerSession<'_>, frame: &[u8]) -> (Vec<u8>, bool) {
    let expect = session.expect();
    let (fp, sid) = expect.unwrap_or((0, 0));
    let res = Message::decode(frame, expect).and_then(|(m, h)| {
        let finish = m == Message::Finish;
        let id = (h.fingerprint, h.session);
        session.handle(m, &h).map(|a| (a, finish, id))
    });
    match res {
        Ok((answer, finish, (f, s))) => (answer.encode(f, s), !finish),
        Err(e) => (
            Message::Error {
                message: e.to_string(),
            }
            .encode(fp, sid),
            false,
        ),
    }
}

impl Transport for LocalTransport<'_> {
    fn exchange(&mut self, msg: &Message, expect: (u64, u64)) -> Result<Message> {
        let out = msg.encode(expect.0, expect.1);
        let back = self.deliver(&out);
        self.last = (out.len(), back.len());
        answer(&back, expect)
    }
    fn last_bytes(&self) -> (usize, usize) {
        self.last
    }
}

/// Decodes the server's answer frame; an `Error` message becomes [`AppError::Protocol`].
pub fn answer(frame: &[u8], expect: (u64, u64)) -> Result<Message> {
    match Message::decode(frame, Some(expect))?.0 {
        Message::Error { message } => {
            Err(AppError::Protocol(format!("the server refused: {message}")))
        }
        m => Ok(m),
    }
}

/// Per-round measurements of a query.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RoundTimes {
    /// Client encryption, seconds.
    pub encrypt_s: f64,
    /// Server look-up (as the server measured it), seconds.
    pub server_s: f64,
    /// Round trip as the client saw it (encode, transfer, server, decode), seconds.
    pub exchange_s: f64,
    /// Client decryption, seconds.
    pub decrypt_s: f64,
    /// Bytes client to server.
    pub bytes_up: usize,
    /// Bytes server to client.
    pub bytes_down: usize,
}

/// What the client learned, and the costs.
#[derive(Clone, Debug, serde::Serialize)]
pub struct QueryOutcome {
    /// The answer.
    pub result: MatchResult,
    /// Matching haplotypes after each prefix (interactive mode: what the client learns).
    pub counts: Vec<usize>,
    /// Haplotypes and sites of the server's panel.
    pub panel: (usize, usize),
    /// Hello exchange (key upload, server initialisation), seconds.
    pub hello_s: f64,
    /// Server initialisation as the server measured it, seconds.
    pub server_init_s: f64,
    /// Bytes of the Hello (keys).
    pub hello_bytes: usize,
    /// Per round.
    pub rounds: Vec<RoundTimes>,
    /// The server's statistics (JSON).
    pub server_stats: serde_json::Value,
    /// Largest angle error of a decrypted index, radians (half spacing `pi / m`).
    pub largest_error: f64,
}

/// Runs a whole query over `t`: Hello, the rounds, Finish.
pub fn run_query(
    client: &Client,
    t: &mut dyn Transport,
    mode: Mode,
    start: usize,
    query: &[u8],
) -> Result<QueryOutcome> {
    if query.is_empty() || query.iter().any(|&x| x > 1) {
        return Err(AppError::Invalid(
            "a query is a nonempty string of alleles 0/1".into(),
        ));
    }
    if mode == Mode::NonInteractive && query.len() > MAX_NONINTERACTIVE {
        return Err(AppError::Invalid(format!(
            "the non-interactive mode takes queries of at most {MAX_NONINTERACTIVE} sites"
        )));
    }
    let expect = client.expect();
    let t0 = Instant::now();
    let hello = client.hello(mode, start, query.len())?;
    let (m, sites, init_s) = match t.exchange(&hello, expect)? {
        Message::HelloAck {
            haplotypes,
            sites,
            init_s,
        } => (haplotypes as usize, sites as usize, init_s),
        other => {
            return Err(AppError::Protocol(format!(
                "expected HelloAck, got {}",
                other.name()
            )))
        }
    };
    let hello_bytes = t.last_bytes().0;
    let hello_s = t0.elapsed().as_secs_f64();
    let mut rounds = Vec::new();
    let mut counts = vec![m];
    let one = Complex64::new(1.0, 0.0);
    let result = match mode {
        Mode::Interactive => {
            // Blinded interval bounds: the server's shift is 0 before the first round.
            let (mut f, mut g) = (0usize, m % SLOTS);
            for (round, &x) in query.iter().enumerate() {
                let mut rt = RoundTimes::default();
                let te = Instant::now();
                let value = if x == 0 {
                    one
                } else {
                    Complex64::new(0.0, 1.0)
                };
                let cts = vec![
                    client.encrypt_one_hot(f, value)?,
                    client.encrypt_one_hot(g, value)?,
                ];
                rt.encrypt_s = te.elapsed().as_secs_f64();
                let tx = Instant::now();
                let reply = t.exchange(
                    &Message::Query {
                        round: round as u32,
                        cts,
                    },
                    expect,
                )?;
                rt.exchange_s = tx.elapsed().as_secs_f64();
                (rt.bytes_up, rt.bytes_down) = t.last_bytes();
                let (cts, server_s) = reply_cts(reply, round, 2)?;
                rt.server_s = server_s;
                let td = Instant::now();
                f = client.decrypt_index(&cts[0])?;
                g = client.decrypt_index(&cts[1])?;
                rt.decrypt_s = td.elapsed().as_secs_f64();
                counts.push((g + SLOTS - f) % SLOTS);
                rounds.push(rt);
            }
            result_from_counts(counts.iter().copied())
        }
        Mode::NonInteractive => {
            let mut rt = RoundTimes::default();
            let te = Instant::now();
            let index = query
                .iter()
                .enumerate()
                .map(|(j, &x)| (x as usize) << j)
                .sum();
            let cts = vec![client.encrypt_one_hot(index, one)?];
            rt.encrypt_s = te.elapsed().as_secs_f64();
            let tx = Instant::now();
            let reply = t.exchange(&Message::Query { round: 0, cts }, expect)?;
            rt.exchange_s = tx.elapsed().as_secs_f64();
            (rt.bytes_up, rt.bytes_down) = t.last_bytes();
            let (cts, server_s) = reply_cts(reply, 0, 2)?;
            rt.server_s = server_s;
            let td = Instant::now();
            let length = client.decrypt_index(&cts[0])?;
            let count = client.decrypt_index(&cts[1])?;
            rt.decrypt_s = td.elapsed().as_secs_f64();
            rounds.push(rt);
            if length > query.len() || count > m {
                return Err(AppError::Protocol(format!(
                    "decrypted an impossible answer (length {length}, count {count})"
                )));
            }
            MatchResult { length, count }
        }
    };
    let server_stats = match t.exchange(&Message::Finish, expect)? {
        Message::Stats { json } => serde_json::from_str(&json)
            .map_err(|e| AppError::Protocol(format!("server statistics are not JSON: {e}")))?,
        other => {
            return Err(AppError::Protocol(format!(
                "expected Stats, got {}",
                other.name()
            )))
        }
    };
    Ok(QueryOutcome {
        result,
        counts,
        panel: (m, sites),
        hello_s,
        server_init_s: init_s,
        hello_bytes,
        rounds,
        server_stats,
        largest_error: client.largest_error(),
    })
}

fn reply_cts(reply: Message, round: usize, n: usize) -> Result<(Vec<Vec<u8>>, f64)> {
    match reply {
        Message::Reply {
            round: r,
            cts,
            server_s,
        } if r as usize == round && cts.len() == n => Ok((cts, server_s)),
        Message::Reply { round: r, cts, .. } => Err(AppError::Protocol(format!(
            "Reply for round {r} with {} ciphertexts, expected round {round} with {n}",
            cts.len()
        ))),
        other => Err(AppError::Protocol(format!(
            "expected Reply, got {}",
            other.name()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The look-up reads the right table entry through the shift and blinding, the
    /// computation's own error is tiny, and the flooded one is about `FLOOD_SLOT_STD`.
    #[test]
    fn lookup_errors() -> Result<()> {
        let ctx = Context::<u64>::new(parameters()?)?;
        let keys = keygen(&ctx, &Evaluator::<u64>::rotate_and_sum_steps(SLOTS), true)?;
        let ev = Evaluator::new(&ctx, Arc::new(keys.evaluation_keys.clone()))?;
        let enc = Encryptor::new(&ctx);
        let dec = Decryptor::new(&ctx, &keys.secret_key)?;
        let m = 2185;
        let t0: Vec<usize> = (0..=m).map(|j| (j * 7 + 3) % m).collect();
        let t1: Vec<usize> = (0..=m).map(|j| (j * 11 + 1000) % m).collect();
        let tables = encode_tables(&ctx, &t0, Some(&t1))?;
        let (f, shift, blind) = (300usize, 4000usize, 1234usize);
        let slot = (f + shift) % SLOTS;
        for (u, want) in [
            (Complex64::new(1.0, 0.0), t0[f]),
            (Complex64::new(0.0, 1.0), t1[f]),
        ] {
            let mut v = vec![Complex64::new(0.0, 0.0); SLOTS];
            v[slot] = u;
            let ct = enc.encrypt_complex_symmetric(&v, &keys.secret_key)?;
            let p = Prepared::new(&ctx, &tables, shift, blind)?;
            let exact = root(want + blind);
            let raw = dec.decrypt_complex(&lookup_unflooded(&ctx, &ev, &p, &ct)?)?;
            let raw_err = raw.iter().map(|z| (z - exact).norm()).fold(0.0, f64::max);
            let out = dec.decrypt_complex(&lookup(&ctx, &ev, &enc, &keys.public_key, &p, &ct)?)?;
            let std =
                (out.iter().map(|z| (z - exact).norm_sqr()).sum::<f64>() / SLOTS as f64).sqrt();
            eprintln!(
                "computation error (max over slots) {raw_err:.2e}, flooded error std {std:.2e}"
            );
            assert!(raw_err < 1e-9, "computation error {raw_err:e}");
            assert!(
                std > 0.5 * FLOOD_SLOT_STD && std < 2.0 * FLOOD_SLOT_STD,
                "flooded std {std:e}"
            );
            assert_eq!(read_root(out[0]).0, (want + blind) % SLOTS);
        }
        Ok(())
    }
}
