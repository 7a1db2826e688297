//! `kernel`: AES through the Linux kernel crypto API over AF_ALG sockets, the modern form of the
//! paper's `/dev/crypto` path. The kernel picks the highest-priority driver it has for `cbc(aes)` /
//! `gcm(aes)`: a hardware crypto module where one exists, otherwise AES-NI or generic C code run on
//! the calling core.
//!
//! Each worker owns a transform socket (bound to the algorithm, keyed once) and an operation socket
//! accepted from it. One item is one or more requests: `sendmsg` with `ALG_SET_OP` and `ALG_SET_IV`
//! (plus `ALG_SET_AEAD_ASSOCLEN` for GCM), then a read of the result. PKCS#7 padding stays in user
//! space, exactly as in the reference engine, so outputs match it byte for byte.
//!
//! Everything here is safe code on `nix`: `accept(2)` hands back a raw descriptor, which
//! `OpSocket` closes on drop, and since no safe conversion to an owned descriptor exists, the
//! operation socket is never given socket options (the socket buffer sizes are read from their
//! system defaults instead).

use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::libc;
use nix::sys::socket::{
    accept4, bind, recv, sendmsg, setsockopt, socket, sockopt, AddressFamily, AlgAddr,
    ControlMessage, MsgFlags, SockFlag, SockType,
};

use super::{pkcs7_pad, pkcs7_unpad, AesWorkload, Cipher, Direction, BLOCK, NONCE, TAG};
use crate::device::{Device, DeviceInfo, DeviceKind, Worker};
use crate::error::{DeviceError, Result};

/// One algorithm of the kernel crypto API and what provides it.
struct Alg {
    /// AF_ALG type (`skcipher` or `aead`).
    kind: &'static str,
    /// Kernel algorithm name.
    name: &'static str,
    /// The module that exposes this type over AF_ALG.
    module: &'static str,
    /// The kernel option behind that module.
    config: &'static str,
}

const CBC: Alg = Alg {
    kind: "skcipher",
    name: "cbc(aes)",
    module: "algif_skcipher",
    config: "CONFIG_CRYPTO_USER_API_SKCIPHER",
};

const GCM: Alg = Alg {
    kind: "aead",
    name: "gcm(aes)",
    module: "algif_aead",
    config: "CONFIG_CRYPTO_USER_API_AEAD",
};

/// Largest CBC request: well inside the default socket buffers (208 KiB), and large enough that
/// syscall cost is small next to the cipher work.
const CHUNK: usize = 64 * 1024;

/// Page size used when `/proc/self/auxv` cannot be read: the largest Linux uses, so limits stay on
/// the safe side.
const FALLBACK_PAGE: usize = 64 * 1024;

/// What to do when the kernel lacks AF_ALG or the algorithm.
const HINT: &str = "use --devices cpu,soft; to use `kernel`, run on a Linux kernel with AF_ALG \
    (`grep CRYPTO_USER_API /boot/config-$(uname -r)` should show =y or =m; if =m, \
    `modprobe algif_skcipher algif_aead`)";

/// What to do when a security policy refuses AF_ALG.
const HINT_POLICY: &str = "use --devices cpu,soft; to use `kernel`, allow AF_ALG sockets (address \
    family 38) in the sandbox or security policy";

fn io(context: String, e: Errno) -> DeviceError {
    DeviceError::Io {
        context,
        source: std::io::Error::from(e),
    }
}

fn unavailable(device: &str, reason: String, hint: &str) -> DeviceError {
    DeviceError::Unavailable {
        device: device.to_string(),
        reason,
        hint: hint.to_string(),
    }
}

/// Creates an AF_ALG socket, telling apart a kernel without the family, a sandbox that refuses it
/// and a process out of descriptors.
fn alg_socket(device: &str) -> Result<OwnedFd> {
    socket(
        AddressFamily::Alg,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| match e {
        Errno::EAFNOSUPPORT => unavailable(
            device,
            "this Linux kernel has no AF_ALG socket family: socket(AF_ALG) failed with \
             EAFNOSUPPORT (the kernel is built without CONFIG_CRYPTO_USER_API / \
             CONFIG_CRYPTO_USER_API_SKCIPHER, as minimal VM and container kernels often are, \
             or a sandbox hides the family)"
                .to_string(),
            HINT,
        ),
        Errno::EPERM | Errno::EACCES => unavailable(
            device,
            format!(
                "socket(AF_ALG) was refused ({e}): a security policy (seccomp, SELinux, \
                 AppArmor or the container runtime) forbids the kernel crypto API to this \
                 process"
            ),
            HINT_POLICY,
        ),
        Errno::EMFILE | Errno::ENFILE | Errno::ENOMEM | Errno::ENOBUFS => {
            io("opening an AF_ALG socket".to_string(), e)
        }
        _ => unavailable(device, format!("socket(AF_ALG) failed: {e}"), HINT),
    })
}

/// A transform socket bound to `alg` and keyed with `key` (and, for GCM, a 16-byte tag).
fn transform(device: &str, alg: &Alg, key: &[u8]) -> Result<OwnedFd> {
    let tfm = alg_socket(device)?;
    bind(tfm.as_raw_fd(), &AlgAddr::new(alg.kind, alg.name)).map_err(|e| match e {
        Errno::ENOENT => unavailable(
            device,
            format!(
                "the kernel crypto API offers no {} `{}` over AF_ALG: bind failed with ENOENT \
                 (the {} interface ({}) or the {} implementation is missing)",
                alg.kind, alg.name, alg.module, alg.config, alg.name
            ),
            HINT,
        ),
        _ => unavailable(
            device,
            format!(
                "binding an AF_ALG socket to {} `{}` failed: {e}",
                alg.kind, alg.name
            ),
            HINT,
        ),
    })?;
    if alg.kind == GCM.kind {
        setsockopt(&tfm, sockopt::AlgSetAeadAuthSize, &TAG).map_err(|e| {
            io(
                format!(
                    "setting the {TAG}-byte tag size on the AF_ALG {} socket",
                    alg.name
                ),
                e,
            )
        })?;
    }
    setsockopt(&tfm, sockopt::AlgSetKey::<&[u8]>::default(), &key).map_err(|e| {
        io(
            format!(
                "setting the {}-byte key on the AF_ALG {} socket",
                key.len(),
                alg.name
            ),
            e,
        )
    })?;
    Ok(tfm)
}

/// An operation socket accepted from a transform socket; closed on drop.
///
/// `accept(2)` in `nix` returns a raw descriptor and turning it into an `OwnedFd` needs `unsafe`,
/// so this wrapper owns it instead: it is never copied out, and only [`Drop`] closes it.
struct OpSocket(RawFd);

impl OpSocket {
    fn accept(tfm: &OwnedFd, alg: &Alg) -> Result<Self> {
        accept4(tfm.as_raw_fd(), SockFlag::SOCK_CLOEXEC)
            .map(OpSocket)
            .map_err(|e| {
                io(
                    format!(
                        "opening an AF_ALG operation socket for {} (accept)",
                        alg.name
                    ),
                    e,
                )
            })
    }
}

impl Drop for OpSocket {
    fn drop(&mut self) {
        // Nothing useful can be done about a failed close of a socket whose requests all completed.
        let _ = nix::unistd::close(self.0);
    }
}

/// The driver the kernel lists for `name` with the highest priority in `/proc/crypto` (which also
/// lists templates such as `cbc(aes)` only once something has instantiated them, so call this after
/// binding).
fn kernel_driver(name: &str) -> Option<String> {
    best_driver(&std::fs::read_to_string("/proc/crypto").ok()?, name)
}

/// The highest-priority, non-internal entry named `name` in the text of `/proc/crypto`: its driver,
/// and its module when that is not built in.
fn best_driver(proc_crypto: &str, name: &str) -> Option<String> {
    proc_crypto
        .split("\n\n")
        .filter_map(|entry| {
            let field = |key: &str| {
                entry.lines().find_map(|line| {
                    let (k, v) = line.split_once(':')?;
                    (k.trim() == key).then(|| v.trim())
                })
            };
            if field("name")? != name || field("internal") == Some("yes") {
                return None;
            }
            let priority: i64 = field("priority")?.parse().ok()?;
            let driver = field("driver")?;
            let driver = match field("module").filter(|m| *m != "kernel") {
                Some(module) => format!("{driver} (module {module})"),
                None => driver.to_string(),
            };
            Some((priority, driver))
        })
        .max_by_key(|(priority, _)| *priority)
        .map(|(_, driver)| driver)
}

/// The kernel's page size, from the auxiliary vector (`AT_PAGESZ`).
fn page_size() -> usize {
    const AT_PAGESZ: usize = 6;
    let word = std::mem::size_of::<usize>();
    std::fs::read("/proc/self/auxv")
        .ok()
        .and_then(|auxv| {
            auxv.chunks_exact(2 * word).find_map(|pair| {
                let (key, value) = pair.split_at(word);
                if usize::from_ne_bytes(key.try_into().ok()?) != AT_PAGESZ {
                    return None;
                }
                value.try_into().ok().map(usize::from_ne_bytes)
            })
        })
        .filter(|p| p.is_power_of_two())
        .unwrap_or(FALLBACK_PAGE)
}

/// Largest GCM result one read can take whole. The kernel maps a read's buffer only while the
/// socket's receive allowance (`net.core.rmem_default`, page-rounded) lasts, and processes an AEAD
/// message whole, so a longer result would come back cut (and a decryption would fail its tag).
/// `None` when the default cannot be read.
fn gcm_read_limit() -> Option<usize> {
    let rmem: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_default")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let page = page_size();
    Some((rmem & !(page - 1)).max(page) - page)
}

/// AES on the Linux kernel crypto API (AF_ALG), one transform and operation socket per worker.
pub struct KernelDevice {
    info: DeviceInfo,
    gcm_limit: Option<usize>,
}

impl KernelDevice {
    /// A `kernel` device with `workers` workers. Probes AF_ALG first (socket, bind to `cbc(aes)`,
    /// key, accept), so a kernel or sandbox without it is refused here with
    /// [`DeviceError::Unavailable`], not mid-run.
    pub fn new(workers: usize) -> Result<Self> {
        if workers == 0 {
            return Err(DeviceError::InvalidParameter(
                "the kernel device needs at least one worker".into(),
            ));
        }
        let tfm = transform("kernel", &CBC, &[0u8; 16])?;
        drop(OpSocket::accept(&tfm, &CBC)?);
        let cbc_desc = match kernel_driver(CBC.name) {
            Some(d) => format!("{} via {d}", CBC.name),
            None => format!("{} (driver not listed in /proc/crypto)", CBC.name),
        };
        // GCM is optional: a kernel may have algif_skcipher without algif_aead; GCM workloads then
        // fail at open.
        let gcm_desc =
            match transform("kernel", &GCM, &[0u8; 32]).and_then(|t| OpSocket::accept(&t, &GCM)) {
                Ok(_) => match kernel_driver(GCM.name) {
                    Some(d) => format!("{} via {d}", GCM.name),
                    None => format!("{} (driver not listed in /proc/crypto)", GCM.name),
                },
                Err(_) => format!("{} not available", GCM.name),
            };
        Ok(KernelDevice {
            info: DeviceInfo {
                name: format!("kernel:{workers}"),
                kind: DeviceKind::Kernel,
                workers,
                engine: format!("kernel AF_ALG: {cbc_desc}, {gcm_desc}"),
                // Without a hardware module the kernel runs AES on the calling core.
                uses_cpu: true,
            },
            gcm_limit: gcm_read_limit(),
        })
    }

    /// Renames the device (to tell two devices of one kind apart in a run).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.info.name = name.into();
        self
    }
}

/// Why a request failed, before it is tied to a device and item.
enum Fail {
    /// A system call failed.
    Sys(&'static str, Errno),
    /// The kernel rejected a GCM tag.
    Tag,
    /// Anything else, in words.
    Other(String),
}

/// Sends one request: the operation, the IV (and for GCM an empty AAD) and up to `src.len()` bytes.
/// Returns how many bytes the socket took; without `MSG_MORE` these are one complete request.
///
/// `MSG_DONTWAIT` makes a message larger than the socket's send allowance come back short instead
/// of blocking forever (nothing else would ever drain it: this thread is the reader).
fn send(
    fd: RawFd,
    encrypt: bool,
    iv: &[u8],
    aead: bool,
    src: &[u8],
) -> std::result::Result<usize, Fail> {
    let op: libc::c_int = if encrypt {
        libc::ALG_OP_ENCRYPT
    } else {
        libc::ALG_OP_DECRYPT
    };
    let assoclen: u32 = 0;
    let all = [
        ControlMessage::AlgSetOp(&op),
        ControlMessage::AlgSetIv(iv),
        ControlMessage::AlgSetAeadAssoclen(&assoclen),
    ];
    let cmsgs = if aead { &all[..] } else { &all[..2] };
    sendmsg::<()>(
        fd,
        &[IoSlice::new(src)],
        cmsgs,
        MsgFlags::MSG_DONTWAIT,
        None,
    )
    .map_err(|e| Fail::Sys("sendmsg", e))
}

/// One read of the result into `dst`, retried if a signal interrupts it.
fn read(fd: RawFd, dst: &mut [u8]) -> std::result::Result<usize, Fail> {
    loop {
        match recv(fd, dst, MsgFlags::empty()) {
            Err(Errno::EINTR) => continue,
            Err(Errno::EBADMSG) => return Err(Fail::Tag),
            Err(e) => return Err(Fail::Sys("read", e)),
            Ok(n) => return Ok(n),
        }
    }
}

/// AES-CBC of whole blocks `src` into `dst` (same length), as requests of at most [`CHUNK`] bytes.
fn cbc(
    fd: RawFd,
    encrypt: bool,
    iv: &[u8; BLOCK],
    src: &[u8],
    dst: &mut [u8],
) -> std::result::Result<(), Fail> {
    let mut iv = *iv;
    let mut pos = 0;
    while pos < src.len() {
        let end = (pos + CHUNK).min(src.len());
        // The socket takes everything, or whole pages up to its send allowance; what it took is one
        // request.
        let taken = send(fd, encrypt, &iv, false, &src[pos..end])?;
        if taken == 0 || !taken.is_multiple_of(BLOCK) {
            return Err(Fail::Other(format!(
                "the AF_ALG socket took {taken} of {} bytes, not a positive number of AES blocks",
                end - pos
            )));
        }
        let out = &mut dst[pos..pos + taken];
        let mut got = 0;
        // The kernel may return a request in parts; it keeps the rest and the chained IV until
        // read.
        while got < taken {
            let n = read(fd, &mut out[got..])?;
            if n == 0 {
                return Err(Fail::Other(format!(
                    "the kernel returned {got} of {taken} bytes and then nothing"
                )));
            }
            got += n;
        }
        // CBC chains through the last ciphertext block, so the next request continues the same
        // item.
        let last = if encrypt {
            &dst[pos + taken - BLOCK..pos + taken]
        } else {
            &src[pos + taken - BLOCK..pos + taken]
        };
        iv.copy_from_slice(last);
        pos += taken;
    }
    Ok(())
}

/// AES-GCM of one whole message: `src` is plaintext (encryption) or ciphertext || tag (decryption),
/// `dst` receives ciphertext || tag or plaintext. The AAD is empty, so the kernel's AAD prefix of
/// the output is empty too.
fn gcm(
    fd: RawFd,
    encrypt: bool,
    nonce: &[u8],
    src: &[u8],
    dst: &mut [u8],
) -> std::result::Result<(), Fail> {
    let taken = send(fd, encrypt, nonce, true, src)?;
    if taken != src.len() {
        return Err(Fail::Other(format!(
            "the AF_ALG socket took only {taken} of this GCM message's {} bytes: the kernel \
             needs an AEAD message whole and the socket's send buffer (net.core.wmem_default) \
             is smaller; raise it or use the cpu device",
            src.len()
        )));
    }
    if dst.is_empty() {
        // A zero-length read would not run the request at all (the kernel reads while the buffer
        // has room), so an empty result (decryption of an empty plaintext) is read into a spare
        // byte the kernel leaves alone.
        let mut spare = [0u8; 1];
        let n = read(fd, &mut spare)?;
        return if n == 0 {
            Ok(())
        } else {
            Err(Fail::Other(format!(
                "the kernel returned {n} bytes for an empty GCM plaintext"
            )))
        };
    }
    let n = read(fd, dst)?;
    if n != dst.len() {
        return Err(Fail::Other(format!(
            "the kernel returned {n} of the {} bytes of a GCM result",
            dst.len()
        )));
    }
    Ok(())
}

struct KernelWorker<'w> {
    work: &'w AesWorkload,
    name: &'w str,
    alg: &'static Alg,
    /// `None` after a failed request, whose leftovers in the kernel must not leak into the next
    /// item. Declared before `tfm` so it is closed first.
    op: Option<OpSocket>,
    /// The keyed transform, kept to accept a fresh operation socket after a failure.
    tfm: OwnedFd,
    gcm_limit: Option<usize>,
}

impl KernelWorker<'_> {
    fn process(&mut self, item: usize) -> Result<Vec<u8>> {
        let fd = match &self.op {
            Some(op) => op.0,
            None => {
                let op = OpSocket::accept(&self.tfm, self.alg)?;
                let fd = op.0;
                self.op = Some(op);
                fd
            }
        };
        let crypto = |what: String| DeviceError::Crypto {
            device: self.name.to_string(),
            item,
            what,
        };
        let fail = |f: Fail| match f {
            Fail::Sys(call, e) => io(
                format!(
                    "device `{}`, item {item}: {call} on the AF_ALG {} socket",
                    self.name, self.alg.name
                ),
                e,
            ),
            Fail::Tag => {
                crypto("GCM tag mismatch (wrong key or nonce, or corrupted ciphertext)".to_string())
            }
            Fail::Other(what) => crypto(what),
        };
        let iv = self.work.iv(item);
        let input = self.work.input(item);
        let encrypt = self.work.direction() == Direction::Encrypt;
        match (self.work.cipher(), encrypt) {
            (Cipher::Aes256Gcm, _) => {
                if !encrypt && input.len() < TAG {
                    return Err(crypto(format!(
                        "GCM ciphertext of {} bytes is shorter than its tag",
                        input.len()
                    )));
                }
                let out_len = if encrypt {
                    input.len() + TAG
                } else {
                    input.len() - TAG
                };
                if let Some(limit) = self.gcm_limit.filter(|&l| out_len > l) {
                    return Err(crypto(format!(
                        "a GCM result of {out_len} bytes is larger than one AF_ALG read returns \
                         whole here ({limit} bytes, set by net.core.rmem_default); raise it or \
                         use the cpu device"
                    )));
                }
                let mut out = vec![0u8; out_len];
                gcm(fd, encrypt, &iv[..NONCE], input, &mut out).map_err(fail)?;
                Ok(out)
            }
            (_, true) => {
                let mut padded = Vec::with_capacity(input.len() + BLOCK);
                padded.extend_from_slice(input);
                pkcs7_pad(&mut padded);
                let mut out = vec![0u8; padded.len()];
                cbc(fd, true, iv, &padded, &mut out).map_err(fail)?;
                Ok(out)
            }
            (_, false) => {
                if input.is_empty() || !input.len().is_multiple_of(BLOCK) {
                    return Err(crypto(format!(
                        "CBC ciphertext of {} bytes is not a positive multiple of 16",
                        input.len()
                    )));
                }
                let mut out = vec![0u8; input.len()];
                cbc(fd, false, iv, input, &mut out).map_err(fail)?;
                pkcs7_unpad(&mut out).map_err(crypto)?;
                Ok(out)
            }
        }
    }
}

impl Worker<Vec<u8>> for KernelWorker<'_> {
    fn run(&mut self, item: usize) -> Result<Vec<u8>> {
        let out = self.process(item);
        if out.is_err() {
            // A failed request may leave data queued in the kernel; the next item gets a fresh
            // operation socket.
            self.op = None;
        }
        out
    }
}

impl Device<AesWorkload> for KernelDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn open<'w>(&'w self, work: &'w AesWorkload) -> Result<Vec<Box<dyn Worker<Vec<u8>> + 'w>>> {
        let alg = if work.cipher().is_gcm() { &GCM } else { &CBC };
        (0..self.info.workers)
            .map(|_| {
                let tfm = transform(&self.info.name, alg, work.key())?;
                let op = Some(OpSocket::accept(&tfm, alg)?);
                Ok(Box::new(KernelWorker {
                    work,
                    name: &self.info.name,
                    alg,
                    op,
                    tfm,
                    gcm_limit: self.gcm_limit,
                }) as Box<dyn Worker<Vec<u8>> + 'w>)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str =
        "name         : cbc(aes)\ndriver       : cbc(aes-generic)\nmodule       : kernel\n\
        priority     : 100\ninternal     : no\ntype         : skcipher\n\n\
        name         : __cbc(aes)\ndriver       : __cbc-aes-aesni\nmodule       : aesni_intel\n\
        priority     : 900\ninternal     : yes\ntype         : skcipher\n\n\
        name         : cbc(aes)\ndriver       : cbc-aes-aesni\nmodule       : aesni_intel\n\
        priority     : 400\ninternal     : no\ntype         : skcipher\n\n\
        name         : gcm(aes)\ndriver       : generic-gcm-aesni\nmodule       : kernel\n\
        priority     : 400\ninternal     : no\ntype         : aead\n";

    #[test]
    fn proc_crypto_picks_the_highest_priority_public_driver() {
        assert_eq!(
            best_driver(SAMPLE, "cbc(aes)").as_deref(),
            Some("cbc-aes-aesni (module aesni_intel)")
        );
        assert_eq!(
            best_driver(SAMPLE, "gcm(aes)").as_deref(),
            Some("generic-gcm-aesni")
        );
        assert_eq!(best_driver(SAMPLE, "ctr(aes)"), None);
    }

    #[test]
    fn page_size_is_a_power_of_two() {
        assert!(page_size().is_power_of_two());
    }

    /// Corrupts one GCM ciphertext in place (the public constructors check every item against the
    /// reference, so only code inside `aes` can build a corrupted one) and checks the tag failure,
    /// then that the worker's next item still decrypts on its fresh operation socket.
    #[test]
    fn corrupted_gcm_ciphertext_is_a_crypto_error() -> Result<()> {
        let device = match KernelDevice::new(1) {
            Ok(d) => d,
            Err(e @ DeviceError::Unavailable { .. }) => {
                assert!(
                    e.to_string().contains("AF_ALG"),
                    "unclear unavailability message: {e}"
                );
                eprintln!("skipping: {e}");
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let mut work = AesWorkload::uniform(Cipher::Aes256Gcm, Direction::Decrypt, 100, 2, 7)?;
        work.input[5] ^= 0x40;
        let mut workers = device.open(&work)?;
        let worker = workers
            .first_mut()
            .ok_or_else(|| DeviceError::InvalidParameter("no worker".into()))?;
        match worker.run(0) {
            Err(DeviceError::Crypto { item: 0, what, .. }) => {
                assert!(what.contains("GCM tag mismatch"), "{what}")
            }
            other => panic!(
                "expected a GCM tag mismatch, got {:?}",
                other.map(|o| o.len())
            ),
        }
        assert_eq!(worker.run(1)?, work.expected(1));
        Ok(())
    }
}
