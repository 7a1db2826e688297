//! Budgeted (`_with`) NTTs, element-wise basis operations and base conversions return exactly
//! the words of the sequential ones, for every budget and backend.

use heloom_math::{
    primes, Backend, BackendChoice, BasisConverter, Eltwise, Form, Modulus, RnsBasis, RnsPoly,
    Threads, Word,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const BUDGETS: [usize; 5] = [1, 2, 3, 4, 7];

/// A pool larger than this machine's core count, so that budgets 3, 4 and 7 really split into
/// that many chunks. Must run before anything touches the pool.
fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("HELOOM_THREADS").is_none() {
            std::env::set_var("HELOOM_THREADS", "8");
        }
    });
}

fn random_poly<W: Word>(basis: &RnsBasis<W>, form: Form, seed: u64) -> RnsPoly<W> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let vals: Vec<u64> = basis
        .moduli()
        .iter()
        .flat_map(|m| {
            let q = m.value();
            (0..basis.n())
                .map(|_| rng.gen_range(0..q))
                .collect::<Vec<_>>()
        })
        .collect();
    basis.poly_from_words(&vals, form).expect("poly")
}

fn check_basis<W: Word>(bits: u32, backend: Backend) {
    let n = 1 << 12;
    let moduli = primes::ntt_primes::<W>(bits, n, 5).expect("primes");
    let basis =
        RnsBasis::<W>::with_backend(n, &moduli, BackendChoice::Force(backend)).expect("basis");
    let a = random_poly(&basis, Form::Ntt, 1);
    let b = random_poly(&basis, Form::Ntt, 2);
    let c = random_poly(&basis, Form::Coeff, 3);

    let mut inv = a.clone();
    basis.inverse(&mut inv).expect("inverse");
    let mut fwd = c.clone();
    basis.forward(&mut fwd).expect("forward");
    let mut sum = a.clone();
    basis.add_assign(&mut sum, &b).expect("add");
    let mut diff = a.clone();
    basis.sub_assign(&mut diff, &b).expect("sub");
    let mut neg = a.clone();
    basis.neg_assign(&mut neg).expect("neg");
    let prod = basis.mul(&a, &b).expect("mul");
    let mut prod2 = a.clone();
    basis.mul_assign(&mut prod2, &b).expect("mul_assign");
    let mut fma = b.clone();
    basis.mul_add(&mut fma, &a, &b).expect("mul_add");
    let mut sc = a.clone();
    basis
        .mul_scalar_assign(&mut sc, u64::MAX - 12345)
        .expect("scalar");

    for t in BUDGETS.map(Threads::new) {
        let mut x = a.clone();
        basis.inverse_with(&mut x, t).expect("inverse_with");
        assert_eq!(x, inv, "inverse, budget {t:?}, {backend}");
        basis.forward_with(&mut x, t).expect("forward_with");
        assert_eq!(x, a, "round trip, budget {t:?}, {backend}");
        let mut x = c.clone();
        basis.forward_with(&mut x, t).expect("forward_with");
        assert_eq!(x, fwd, "forward, budget {t:?}, {backend}");
        let mut x = a.clone();
        basis.add_assign_with(&mut x, &b, t).expect("add");
        assert_eq!(x, sum, "add, budget {t:?}");
        let mut x = a.clone();
        basis.sub_assign_with(&mut x, &b, t).expect("sub");
        assert_eq!(x, diff, "sub, budget {t:?}");
        let mut x = a.clone();
        basis.neg_assign_with(&mut x, t).expect("neg");
        assert_eq!(x, neg, "neg, budget {t:?}");
        assert_eq!(basis.mul_with(&a, &b, t).expect("mul"), prod, "mul, {t:?}");
        let mut x = a.clone();
        basis.mul_assign_with(&mut x, &b, t).expect("mul_assign");
        assert_eq!(x, prod2, "mul_assign, budget {t:?}");
        let mut x = b.clone();
        basis.mul_add_with(&mut x, &a, &b, t).expect("mul_add");
        assert_eq!(x, fma, "mul_add, budget {t:?}");
        let mut x = a.clone();
        basis
            .mul_scalar_assign_with(&mut x, u64::MAX - 12345, t)
            .expect("scalar");
        assert_eq!(x, sc, "mul_scalar, budget {t:?}");
        // Errors are the sequential ones: a coefficient-form operand for a product.
        assert!(basis.mul_with(&c, &c, t).is_err());
        let mut x = c.clone();
        assert!(basis.inverse_with(&mut x, t).is_err());
    }
}

#[test]
fn budgeted_basis_ops_match_sequential() {
    init();
    if std::env::var("HELOOM_THREADS").as_deref() == Ok("8") {
        // The budgets below really split that many ways.
        assert_eq!(Threads::new(7).chunks_for(1000), 7);
    }
    for backend in Backend::available() {
        if backend.check(64, 50).is_ok() {
            check_basis::<u64>(50, backend);
        }
        if backend.check(32, 30).is_ok() {
            check_basis::<u32>(30, backend);
        }
    }
}

fn check_conversion<W: Word>(bits: u32, backend: Backend, k: usize, m: usize, n: usize) {
    let qs = primes::ntt_primes::<W>(bits, 1 << 12, k + m).expect("primes");
    let mods: Vec<Modulus<W>> = qs
        .iter()
        .map(|&q| Modulus::new(q))
        .collect::<Result<_, _>>()
        .expect("moduli");
    let elt = Eltwise::new(BackendChoice::Force(backend), bits).expect("eltwise");
    let conv = BasisConverter::new(&mods[..k], &mods[k..], elt).expect("converter");
    let mut rng = ChaCha20Rng::seed_from_u64((k * 100 + m) as u64 + n as u64);
    let input: Vec<Vec<W>> = qs[..k]
        .iter()
        .map(|&q| (0..n).map(|_| W::from_u64(rng.gen_range(0..q))).collect())
        .collect();
    let ins: Vec<&[W]> = input.iter().map(Vec::as_slice).collect();
    let run = |centered: bool, t: Option<Threads>| -> Vec<Vec<W>> {
        let mut out: Vec<Vec<W>> = (0..m).map(|_| vec![W::ZERO; n]).collect();
        let mut outs: Vec<&mut [W]> = out.iter_mut().map(Vec::as_mut_slice).collect();
        match (centered, t) {
            (false, None) => conv.convert(&ins, &mut outs),
            (false, Some(t)) => conv.convert_with(&ins, &mut outs, t),
            (true, None) => conv.convert_centered(&ins, &mut outs),
            (true, Some(t)) => conv.convert_centered_with(&ins, &mut outs, t),
        }
        .expect("convert");
        out
    };
    let plain = run(false, None);
    let centered = run(true, None);
    for t in BUDGETS.map(Threads::new) {
        assert_eq!(
            run(false, Some(t)),
            plain,
            "convert k={k} m={m} n={n} {t:?} {backend}"
        );
        assert_eq!(
            run(true, Some(t)),
            centered,
            "centered k={k} m={m} n={n} {t:?} {backend}"
        );
    }
}

#[test]
fn budgeted_conversions_match_sequential() {
    init();
    for backend in Backend::available() {
        for (k, m) in [(1, 3), (2, 5), (3, 4)] {
            // Lengths that split evenly, unevenly, and not at all (below one split unit).
            for n in [1 << 12, 1000, 48] {
                if backend.check(64, 50).is_ok() {
                    check_conversion::<u64>(50, backend, k, m, n);
                }
                if backend.check(32, 30).is_ok() {
                    check_conversion::<u32>(30, backend, k, m, n);
                }
            }
        }
    }
}

#[test]
fn budgeted_conversion_checks_shapes() {
    init();
    let qs = primes::ntt_primes::<u64>(40, 1 << 10, 3).expect("primes");
    let mods: Vec<Modulus<u64>> = qs
        .iter()
        .map(|&q| Modulus::new(q))
        .collect::<Result<_, _>>()
        .expect("moduli");
    let elt = Eltwise::new(BackendChoice::Auto, 40).expect("eltwise");
    let conv = BasisConverter::new(&mods[..2], &mods[2..], elt).expect("converter");
    let (x, short) = (vec![1u64; 512], vec![1u64; 100]);
    let mut y = vec![0u64; 512];
    for t in BUDGETS.map(Threads::new) {
        assert!(conv.convert_with(&[&x, &short], &mut [&mut y], t).is_err());
        assert!(conv.convert_centered_with(&[&x], &mut [&mut y], t).is_err());
    }
}
