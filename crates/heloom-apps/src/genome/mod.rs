//! Private genome search (seed 004): the longest match of an encrypted query in a haplotype
//! panel, over the positional Burrows-Wheeler transform, with CKKS.
//!
//! # Problem
//!
//! The server holds a panel of `M` haplotypes over `S` biallelic sites (the repository's is a
//! msprime coalescent simulation, 2,184 x 10,000 like Tsuji et al.'s and Shimizu et al.'s). The
//! client holds a query: alleles `z[s..s+l)` at consecutive sites from a start `s`. The start
//! and the length are public (as in Shimizu et al. 2016); the alleles are private. The answer is
//! the longest match `t <= l` (some haplotype equals `z` on `[s, s+t)`) and the number of
//! haplotypes that match that far. [`pbwt`] computes it in plaintext (the reference every
//! encrypted answer is checked against) and by brute force (tests).
//!
//! # PBWT (Durbin 2014)
//!
//! `a_k` orders the haplotypes by reversed prefix, so those equal to `z` on `[s, k)` are an
//! interval `[f, g)` of `a_k`, `[0, M)` at `k = s`. For allele `x` at site `k`,
//! `f' = V_k^x[f]`, `g' = V_k^x[g]` with the rank tables `V_k^0[i] = u_k(i)` and
//! `V_k^1[i] = c_k + i - u_k(i)`, `i` in `0..=M`. The match ends when `f' = g'`; the count is
//! `g - f`. The server keeps the rank tables (`2 (M + 1) S` bytes, 44 MB for the full panel).
//!
//! # Encoding: indices as roots of unity
//!
//! An index `v` in `[0, m)`, `m = 4096 = N/2` slots at `N = 2^13` (`m > M`), is the complex
//! number `w^v`, `w = exp(2 pi i / m)`. Adding `r` mod `m` is multiplying by `w^r`; the
//! decryptor reads `v = round(arg(z) m / 2 pi) mod m`. CKKS is approximate, but the read is
//! exact as long as the angle error stays below half the spacing, `pi / m = 7.7e-4`; the
//! error budget below keeps it at `5e-5` (one standard deviation), so a wrong read is a
//! 15-sigma event. Blinding by a uniform `r` mod `m` is exactly uniform on the roots.
//!
//! # Interactive protocol (one round per character; after Shimizu et al. 2016)
//!
//! The client knows blinded bounds `F = f + r`, `G = g + r` (mod `m`, one `r` for both;
//! initially `r = 0`, `F = 0`, `G = M`). For character `z_k` it sends two fresh secret-key
//! ciphertexts, one-hot at slot `F` and at slot `G`, with value `u = 1` for allele 0 and
//! `u = i` for allele 1 — the allele hides in the same ciphertext. The server, per ciphertext:
//!
//! 1. takes the site's pre-encoded tables `A = (T^0 - i T^1)/2` and `conj(B)` with
//!    `B = (T^0 + i T^1)/2`, `T^x[j] = w^(V_k^x[j])`, and rotates them right by its previous
//!    blinding `r` — a rotation of a *plaintext* is a permutation of its NTT points, no key
//!    switch — so slot `F` meets the entry of the true index `f = F - r`;
//! 2. multiplies them by the Gaussian integers `round(K w^r')` and `round(K w^-r')`
//!    (`K = 2^36`, exact to `2^-36` in angle) for a fresh uniform `r'` (ChaCha20 seeded by the
//!    OS), then the ciphertext by both: `X = ct * A'`, `Y = ct * conj(B)'`; one rescale;
//! 3. `Z = X + conj(Y)`: in slot `F`, `A u + B conj(u)` is `T^0[f]` for `u = 1` and `T^1[f]`
//!    for `u = i`, times `w^r'`; zero elsewhere. One conjugation (key switch);
//! 4. rotate-and-sum over the 4,096 slots (12 rotations by powers of two): every slot holds
//!    `w^(f' + r')`;
//! 5. adds a public-key encryption of zero with a flooding error uniform in `[-2^b, 2^b)`
//!    per coefficient ([`heloom_ckks::Encryptor::encrypt_zero_flooded`]), `b` chosen so the
//!    decoded slot error has standard deviation `5e-5` (`b = 71` at the result scale `2^91`).
//!
//! The client decrypts slot 0 of both results: `F' = f' + r'`, `G' = g' + r'`, and
//! `G' - F' = g' - f'`. It always runs all `l` rounds (after the match has ended the interval
//! stays empty, `F' = G'`, and the rounds look the same), so the server learns nothing from
//! their number or timing.
//!
//! Per round the server does 2 x (1 conjugation + 12 rotations) key switches at level 1 of
//! the chain, two plaintext products, and two flooding encryptions; the two ciphertexts run on
//! two threads.
//!
//! # Non-interactive mode (`l <= 12`)
//!
//! The server tabulates the answer for every one of the `2^l` possible query strings (PBWT,
//! `O(2^l l)`), encodes `w^length` and `w^count` as two tables (one slot per string), and the
//! client sends one ciphertext one-hot at the index of its string (value 1). The server does
//! steps 2 to 5 above with `r' = 0` (no blinding needed: these are the answer) for both tables
//! and returns two ciphertexts. One round, depth 1; the cost is `2^l` table entries (at most
//! the 4,096 slots) and two look-ups.
//!
//! # Parameters
//!
//! `N = 2^13`, three 50-bit ciphertext primes and one 50-bit special prime (`log QP = 200`,
//! at most 218 for 128-bit security per the HE standard; heloom's check is on). Primes of at
//! most 50 bits run on the AVX-512 IFMA backend where there is one (30% faster per look-up
//! here than a 60/40/54-bit chain). Fresh queries at scale `2^55` on all three primes; the
//! tables at scale `q_2`; one rescale by `q_2` leaves scale `2^91` on `q_0 q_1` (`2^100`) for
//! the key switches, whose error is then negligible, and the flooding.
//!
//! # Privacy (semi-honest parties)
//!
//! * **Server**: sees the public start and length and, per round, fresh RLWE ciphertexts
//!   under the client's key (IND-CPA): nothing of the alleles or of the blinded bounds.
//!   The round count is always `l`.
//! * **Client**: decrypts `w^(f'+r')` and `w^(g'+r')` with a fresh uniform `r'` per round,
//!   so it learns `g' - f'` and nothing about `f'`. All other slots hold the same value
//!   (full rotate-and-sum), and the ciphertext is re-randomized and flooded.
//! * **Leak, stated precisely**: the client learns the number of haplotypes matching *every*
//!   prefix of its query, `g_t - f_t` for `t = 0..l` — more than the longest match and its
//!   count (which are its last nonzero value and where it falls to zero). This is what
//!   Shimizu et al.'s "the client learns when `f = g`" needs. The non-interactive mode
//!   reveals only the longest match and its count.
//! * **Flooding margin**: circuit privacy rests on the flooding error being much larger than
//!   the computation's own error (which depends on the tables). Measured (the unit test
//!   `lookup_errors`): the computation's error is at most `6e-12` in any slot (the `K`
//!   rounding, a function of `r'` only, and the rounding of the tables at scale `q_2`), the
//!   flooding error `5e-5`: a margin of about `2^23`. That is a heuristic margin, not the
//!   `2^-40` statistical distance of the smudging lemma, which would need about 20 more
//!   modulus bits and `N = 2^14`.
//! * A malicious client could send a vector that is not one-hot and learn linear
//!   combinations of table entries (as in Shimizu et al., the model is semi-honest).
//!
//! # Wire format and transport
//!
//! [`wire`]: framed messages with magic, version, kind, the CKKS parameter fingerprint, a
//! session id (hash of the client's public key), length, and a checksum; malformed,
//! truncated, oversized or mismatched frames give [`crate::AppError::Protocol`]. [`net`]: TCP,
//! one session per connection; a refused message gets an `Error` frame.
//!
//! # Memory tiers
//!
//! A session's encoded tables — two plaintexts of 192 KiB per site the query touches (the
//! server encodes only those; all 10,000 sites would be 3.9 GB) — are the server's large
//! working set. They are made one site at a time and handed to a table sink
//! ([`protocol::Server::with_table_sink`]); [`tiered::with_budget`] puts them in a
//! [`heloom_store::Store`] whose memory budget is a fraction of the session's tables, tells it
//! the protocol's access order (site `s`, `s + 1`, ...) so it prefetches ahead and evicts the
//! site needed furthest in the future, and reports its statistics in the session's `Stats`.
//! The evaluation keys (13 Galois keys, about 20 MB in memory) stay outside the budget: the
//! evaluator holds them as one object.
//!
//! # Costs (2,184 x 10,000 panel, `N = 2^13`)
//!
//! Per character: 2 x 154 KB up (seeded fresh ciphertexts on three primes), 2 x 205 KB down
//! (two primes), 26 key switches at two primes on the server. Key upload: 8.8 MB once.
//! `heloom genome demo` measures the rest; on the 2-core development VM
//! (`bench/results/genome-amd-epyc-zen4/`): about 10 ms of server time per character, 0.08 s
//! end to end for a query of length 1 and 1.5 s for length 100, against 477 s for length 1 on
//! 12 cores for HElib with bootstrapping (Tsuji et al.).
//!
//! # Command line
//!
//! `heloom genome serve [--addr A] [--panel F] [--budget-fraction B]`,
//! `heloom genome query [--addr A] [--start S] [--length L] [--mode interactive|noninteractive]`,
//! `heloom genome demo [--length L] [--json] [--out DIR]` (a server process and a client,
//! budgets 100%, 25%, 10%). The panel: `train/make_panel.py` (msprime, fixed seeds) wrote
//! `data/panel_2184x10000.bin.gz`, embedded in the program.

pub mod net;
pub mod panel;
pub mod pbwt;
pub mod protocol;
pub mod tiered;
pub mod wire;

pub use panel::Panel;
pub use pbwt::{brute_force, MatchResult, Pbwt};
pub use protocol::{run_query, Client, LocalTransport, QueryOutcome, Server};
pub use wire::{Message, Mode};
