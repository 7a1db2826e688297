//! Prints the seed-001 comparison for a device list: `cargo run --release --example offload_table -- cpu:1,soft:1`.

use heloom_devices::aes::{Cipher, Direction};
use heloom_devices::compare::{compare, CompareConfig};
use heloom_devices::{open_aes_devices, Device, DeviceSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let spec = args.get(1).map_or("cpu:1,soft:1", |s| s.as_str());
    let cipher = Cipher::parse(args.get(2).map_or("aes-128-cbc", |s| s.as_str()))?;
    let dir = if args.get(3).is_some_and(|s| s == "decrypt") {
        Direction::Decrypt
    } else {
        Direction::Encrypt
    };
    let devices = open_aes_devices(&DeviceSpec::parse_list(spec)?)?;
    let refs: Vec<&dyn heloom_devices::Device<_>> = devices
        .iter()
        .map(|d| d.as_ref() as &dyn Device<_>)
        .collect();
    let cfg = CompareConfig {
        cipher,
        direction: dir,
        reps: 3,
        ..Default::default()
    };
    let rep = compare(&refs, &cfg, &mut |_, _, _| {})?;
    for r in &rep.runs {
        println!(
            "{:>6} {:>12} {:9.3} ms  ideal {:9.3}  eff {:5.3}  items {:?}",
            r.size, r.method, r.ms, r.ideal_ms, r.efficiency, r.items_per_device
        );
    }
    Ok(())
}
