//! What heloom learns: runs the paper's sizes four times over `cpu:1` + `soft:1` and prints each run with the
//! learned per-item cost of 8-byte and 16 KB items on both devices.
//! `cargo run --release -p heloom-devices --example learned_curves`
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use heloom_devices::aes::{AesWorkload, Cipher, Direction};
use heloom_devices::balance::{Balancer, Method};
use heloom_devices::{open_aes_devices, Device, DeviceSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let devices = open_aes_devices(&DeviceSpec::parse_list("cpu:1,soft:1")?)?;
    let refs: Vec<&dyn Device<AesWorkload>> = devices.iter().map(|d| d.as_ref()).collect();
    let sizes = [8usize, 16, 64, 256, 1024, 4096, 8192, 16384];
    let mut works: Vec<AesWorkload> = sizes
        .iter()
        .map(|&s| AesWorkload::uniform(Cipher::Aes128Cbc, Direction::Encrypt, s, 4000, 1))
        .collect::<Result<_, _>>()?;
    works.push(AesWorkload::mixed(
        Cipher::Aes128Cbc,
        Direction::Encrypt,
        &sizes,
        500,
        2,
    )?);
    let mut b = Balancer::new(Method::Heloom);
    for round in 0..4 {
        for (i, w) in works.iter().enumerate() {
            let out = b.run(&refs, w)?;
            let c = b.book().curve("cpu:1");
            let s = b.book().curve("soft:1");
            println!(
                "round {round} size {:>5}: {:.3} ms items {:?} claims {} fin {:?} | cpu 8B {:?} soft 8B {:?} | 16K cpu {:?} soft {:?}",
                sizes.get(i).copied().unwrap_or(0),
                out.report.ms,
                out.report.items_per_device,
                out.report.claims,
                out.report.finish_ms_per_device.iter().map(|x| x.round()).collect::<Vec<_>>(),
                c.predict(8).map(|x| x.round()),
                s.predict(8).map(|x| x.round()),
                c.predict(16384).map(|x| x.round()),
                s.predict(16384).map(|x| x.round())
            );
        }
    }
    Ok(())
}
