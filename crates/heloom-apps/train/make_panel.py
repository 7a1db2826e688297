"""Generates heloom's haplotype panel for the private genome search (seed 004).

A coalescent simulation with msprime (Kelleher et al. 2016) under human-like parameters:
effective population size 10,000, mutation rate 1.25e-8 and recombination rate 1e-8 per base
per generation, 1,092 diploid individuals (2,184 haplotypes, the size of the 1000 Genomes phase 1
panel that Tsuji et al. and Shimizu et al. searched). The first 10,000 biallelic sites are kept.

Output: `crates/heloom-apps/data/panel_2184x10000.bin.gz`, the gzip of the HLPANEL1 format read by
`heloom_apps::genome::panel`:

    b"HLPANEL1", u32 LE haplotypes M, u32 LE sites S,
    S rows of ceil(M / 8) bytes (site-major; bit h % 8 of byte h // 8 is haplotype h's allele),
    u64 LE FNV-1a 64 of every byte before it.

Reproducible: fixed seeds and a zero gzip timestamp give the same bytes on every run.

    python crates/heloom-apps/train/make_panel.py [--out FILE]
"""

import argparse
import gzip
import struct
from pathlib import Path

import msprime
import numpy as np

HAPLOTYPES = 2184
SITES = 10_000
SEQUENCE_LENGTH = 3_000_000  # about 12,000 segregating sites for 2,184 samples
ANCESTRY_SEED = 4004
MUTATION_SEED = 4005

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


def fnv1a64(data: bytes) -> int:
    """FNV-1a 64 of `data` (the panel file's checksum)."""
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def simulate() -> np.ndarray:
    """The panel as a (sites, haplotypes) array of 0/1 alleles."""
    ts = msprime.sim_ancestry(
        samples=HAPLOTYPES // 2,
        ploidy=2,
        population_size=10_000,
        recombination_rate=1e-8,
        sequence_length=SEQUENCE_LENGTH,
        random_seed=ANCESTRY_SEED,
    )
    ts = msprime.sim_mutations(
        ts,
        rate=1.25e-8,
        model=msprime.BinaryMutationModel(),
        random_seed=MUTATION_SEED,
    )
    rows = []
    for var in ts.variants():
        g = var.genotypes
        if len(var.alleles) == 2 and 0 < g.sum() < len(g):
            rows.append(g.astype(np.uint8))
        if len(rows) == SITES:
            break
    if len(rows) < SITES:
        raise SystemExit(f"only {len(rows)} biallelic sites; raise SEQUENCE_LENGTH")
    return np.stack(rows)


def encode(panel: np.ndarray) -> bytes:
    """The HLPANEL1 bytes of a (sites, haplotypes) 0/1 array."""
    sites, haps = panel.shape
    body = bytearray(b"HLPANEL1")
    body += struct.pack("<II", haps, sites)
    body += np.packbits(panel, axis=1, bitorder="little").tobytes()
    body += struct.pack("<Q", fnv1a64(bytes(body)))
    return bytes(body)


def main() -> None:
    """Simulates the panel and writes the gzip file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).parent.parent / "data" / "panel_2184x10000.bin.gz",
    )
    args = parser.parse_args()
    panel = simulate()
    data = encode(panel)
    with open(args.out, "wb") as f, gzip.GzipFile(filename="", fileobj=f, mode="wb", mtime=0) as gz:
        gz.write(data)
    freq = panel.mean(axis=1)
    print(
        f"wrote {args.out}: {panel.shape[1]} haplotypes x {panel.shape[0]} sites, "
        f"median minor-allele frequency {np.median(np.minimum(freq, 1 - freq)):.4f}"
    )


if __name__ == "__main__":
    main()
