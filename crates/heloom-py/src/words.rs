//! One Python object, two word sizes: every heloom object is generic over its word (`u32` or
//! `u64`), Python sees one class. [`Words`] holds either instantiation and the [`words!`] /
//! [`words_wrap!`] macros dispatch a body over one or several of them at once.

use heloom_ckks::{
    Ciphertext, CkksError, Context, Encryptor, EvaluationKeys, Evaluator, Plaintext, PublicKey,
    SecretKey,
};
use std::sync::Arc;

/// A heloom object for 32-bit words or for 64-bit words.
#[derive(Clone, Debug)]
pub enum Words<A, B> {
    /// The 32-bit-word instantiation.
    W32(A),
    /// The 64-bit-word instantiation.
    W64(B),
}

impl<A, B> Words<A, B> {
    /// 32 or 64.
    pub fn word_bits(&self) -> u32 {
        match self {
            Words::W32(_) => 32,
            Words::W64(_) => 64,
        }
    }
}

/// A context.
pub type CtxW = Words<Arc<Context<u32>>, Arc<Context<u64>>>;
/// An encryptor (holds its own random generator).
pub type EncW = Words<Encryptor<u32>, Encryptor<u64>>;
/// A ciphertext.
pub type CtW = Words<Ciphertext<u32>, Ciphertext<u64>>;
/// A plaintext.
pub type PtW = Words<Plaintext<u32>, Plaintext<u64>>;
/// A secret key.
pub type SkW = Words<SecretKey<u32>, SecretKey<u64>>;
/// A public key.
pub type PkW = Words<PublicKey<u32>, PublicKey<u64>>;
/// Evaluation keys (shared by every evaluator built from them).
pub type EkW = Words<Arc<EvaluationKeys<u32>>, Arc<EvaluationKeys<u64>>>;
/// An evaluator (cheap to clone: two `Arc`s).
pub type EvW = Words<Evaluator<u32>, Evaluator<u64>>;

/// The error for operands of different word sizes (always different parameters too).
pub fn mismatch() -> CkksError {
    CkksError::ParameterMismatch(
        "objects made for 32-bit-word parameters cannot be combined with objects made for 64-bit-word parameters; use objects of one context".into(),
    )
}

/// Runs `body` with every listed `Words` value unwrapped to the same word size; the body has
/// the same type (a `Result<_, CkksError>`) for both sizes. Operands of different sizes give
/// [`mismatch`].
///
/// `words!((a, b) => |x, y| body)`
macro_rules! words {
    (($($v:expr),+ $(,)?) => |$($n:ident),+| $body:expr) => {
        match ($($v,)+) {
            ($($crate::words::Words::W32($n),)+) => $body,
            ($($crate::words::Words::W64($n),)+) => $body,
            #[allow(unreachable_patterns)]
            _ => Err($crate::words::mismatch()),
        }
    };
}

/// Like [`words!`], for a body returning `Result<T<W>, CkksError>`: the result is wrapped back
/// into `Words`.
macro_rules! words_wrap {
    (($($v:expr),+ $(,)?) => |$($n:ident),+| $body:expr) => {
        match ($($v,)+) {
            ($($crate::words::Words::W32($n),)+) => ($body).map($crate::words::Words::W32),
            ($($crate::words::Words::W64($n),)+) => ($body).map($crate::words::Words::W64),
            #[allow(unreachable_patterns)]
            _ => Err($crate::words::mismatch()),
        }
    };
}

/// Runs `body` on the value inside one `Words`, whichever its word size; the body has the
/// same type for both sizes (no mismatch is possible with one value).
///
/// `each!(&key => |k| k.to_bytes())`
macro_rules! each {
    ($v:expr => |$n:ident| $body:expr) => {
        match $v {
            $crate::words::Words::W32($n) => $body,
            $crate::words::Words::W64($n) => $body,
        }
    };
}

pub(crate) use {each, words, words_wrap};

impl From<Ciphertext<u32>> for CtW {
    fn from(c: Ciphertext<u32>) -> Self {
        Words::W32(c)
    }
}

impl From<Ciphertext<u64>> for CtW {
    fn from(c: Ciphertext<u64>) -> Self {
        Words::W64(c)
    }
}
