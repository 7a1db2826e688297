//! The device layer from Python (`heloom-devices`): bulk AES of many items ("files") over
//! devices pulling from one queue (`aes_encrypt`, `aes_decrypt`, returning an `AesResult`),
//! the devices this machine has (`offload_devices`), and the comparisons of devices and
//! balancers on AES items (`offload_compare`) and on HE job streams (`he_offload_compare`).
//!
//! Every call opens its devices, runs without the GIL and closes them again; reports come
//! back as plain dicts.

use std::collections::HashSet;

use heloom_devices::aes::{self, AesWorkload, Cipher, Direction, BLOCK, NONCE};
use heloom_devices::balance::{Balancer, Method};
use heloom_devices::compare::{compare, CompareConfig};
use heloom_devices::he::{compare_he, open_he_devices, parse_variant, HeCompareConfig};
use heloom_devices::spec::device_names;
use heloom_devices::{
    open_aes_devices, Device, DeviceError, DeviceInfo, DeviceKind, DeviceSpec, Workload,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyMemoryView, PyString};
use serde::Serialize;

use crate::errors::{device_to_py, input_error, HeloomError};

/// Balancers a run can use besides a single device's name.
const BALANCERS: [&str; 4] = ["round-robin", "polling", "pull", "heloom"];

/// What bulk AES returns: ``outputs`` (one ``bytes`` per item, in item order: ciphertexts with
/// PKCS#7 padding (CBC) or the 16-byte tag appended (GCM) after ``aes_encrypt``, plaintexts
/// after ``aes_decrypt``), ``ivs`` (the IV of every item; keep them with the ciphertexts,
/// ``aes_decrypt`` needs them) and ``report`` (how the run went, a dict). ``len(result)`` is
/// the number of items.
#[pyclass(name = "AesResult", module = "heloom", frozen)]
pub struct PyAesResult {
    outputs: Vec<Py<PyBytes>>,
    ivs: Vec<Py<PyBytes>>,
    report: Py<PyDict>,
}

#[pymethods]
impl PyAesResult {
    /// The outputs, one ``bytes`` per item in item order (a new list on every access).
    #[getter]
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.outputs.iter().map(|o| o.bind(py)))
    }

    /// The IV of every item, in item order: 16 bytes each (GCM uses the first 12 as its
    /// nonce), or the 12-byte GCM nonces given to the call.
    #[getter]
    fn ivs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.ivs.iter().map(|o| o.bind(py)))
    }

    /// How the run went (a copy): ``method`` (the balancer, or the device's name when one
    /// device ran alone), ``cipher``, ``direction``, ``items``, ``bytes`` (input bytes),
    /// ``ms`` (from the start signal to the last worker's finish), ``mb_per_s``, ``claims``
    /// (queue claims), ``devices`` (a dict per device: ``name``, ``kind``, ``workers``,
    /// ``engine``, ``uses_cpu``) and, keyed by device name, ``items_per_device``,
    /// ``bytes_per_device``, ``busy_ms_per_device`` (time inside items, summed over the
    /// device's workers) and ``finish_ms_per_device``.
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.report.bind(py).copy()
    }

    fn __len__(&self) -> usize {
        self.outputs.len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let r = self.report.bind(py);
        let get = |k: &str| {
            r.get_item(k)
                .ok()
                .flatten()
                .and_then(|v| v.repr().ok())
                .map_or_else(|| "?".to_string(), |s| s.to_string())
        };
        format!(
            "AesResult(items={}, cipher={}, direction={}, method={}, ms={})",
            self.outputs.len(),
            get("cipher"),
            get("direction"),
            get("method"),
            get("ms")
        )
    }
}

/// `obj` as `bytes`: bytes as they are, bytearray and memoryview copied, anything else a
/// TypeError naming `what`.
fn as_bytes<'py>(
    obj: &Bound<'py, PyAny>,
    what: &dyn Fn() -> String,
) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.clone());
    }
    if obj.is_instance_of::<PyByteArray>() || obj.is_instance_of::<PyMemoryView>() {
        let py = obj.py();
        return Ok(py
            .get_type::<PyBytes>()
            .call1((obj,))?
            .cast_into::<PyBytes>()?);
    }
    Err(PyTypeError::new_err(format!(
        "{} must be bytes (or bytearray/memoryview), got {}{}",
        what(),
        obj.get_type().name()?,
        if obj.is_instance_of::<PyString>() {
            "; encode text first, e.g. s.encode()"
        } else {
            ""
        }
    )))
}

/// A sequence of byte strings (one per item); a lone bytes or str object is refused rather
/// than iterated.
fn byte_items<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    if obj.is_instance_of::<PyBytes>()
        || obj.is_instance_of::<PyByteArray>()
        || obj.is_instance_of::<PyMemoryView>()
        || obj.is_instance_of::<PyString>()
    {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a sequence of bytes objects (one per item), got a single {}; wrap \
             one item in a list",
            obj.get_type().name()?
        )));
    }
    let mut out = Vec::new();
    for (i, item) in obj
        .try_iter()
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{what} must be a sequence of bytes objects (one per item)"
            ))
        })?
        .enumerate()
    {
        out.push(as_bytes(&item?, &|| format!("{what}[{i}]"))?);
    }
    Ok(out)
}

/// The 16-byte IVs of a call, from `ivs` (GCM also takes 12-byte nonces, zero-extended).
fn parse_ivs(ivs: &[Bound<'_, PyBytes>], cipher: Cipher) -> PyResult<Vec<[u8; BLOCK]>> {
    ivs.iter()
        .enumerate()
        .map(|(i, iv)| {
            let b = iv.as_bytes();
            if b.len() == BLOCK || (cipher.is_gcm() && b.len() == NONCE) {
                let mut out = [0u8; BLOCK];
                out[..b.len()].copy_from_slice(b);
                Ok(out)
            } else {
                let want = if cipher.is_gcm() {
                    "16-byte IVs (the first 12 bytes are the nonce) or 12-byte nonces"
                } else {
                    "16-byte IVs"
                };
                Err(input_error(format!(
                    "ivs[{i}] has {} bytes; {} takes {want}",
                    b.len(),
                    cipher.name()
                )))
            }
        })
        .collect()
}

/// The method `balancer` names: a balancer, or one of `names` (a device's full name such as
/// `soft:1`, or its kind when only one device has it) to run on that device alone.
fn method_for(balancer: &str, names: &[String]) -> PyResult<Method> {
    if let Ok(m) = Method::parse(balancer) {
        return Ok(m);
    }
    let b = balancer.trim().to_ascii_lowercase();
    if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(&b)) {
        return Ok(Method::Single(i));
    }
    let kind = |n: &String| n.split([':', '#']).next().unwrap_or_default().to_string();
    let hits: Vec<usize> = (0..names.len()).filter(|&i| kind(&names[i]) == b).collect();
    match hits.as_slice() {
        [i] => Ok(Method::Single(*i)),
        [] => Err(input_error(format!(
            "unknown balancer {balancer:?}; choose {} or the name of one device to run on it \
             alone ({})",
            BALANCERS.join(", "),
            names.join(", ")
        ))),
        _ => Err(input_error(format!(
            "balancer {balancer:?} matches several devices ({}); name one of them exactly",
            hits.iter()
                .map(|&i| names[i].as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Parses a device list, naming the argument in the error.
fn parse_specs(devices: &str) -> PyResult<Vec<DeviceSpec>> {
    DeviceSpec::parse_list(devices).map_err(device_to_py)
}

fn device_dict<'py>(py: Python<'py>, info: &DeviceInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &info.name)?;
    d.set_item("kind", info.kind.name())?;
    d.set_item("workers", info.workers)?;
    d.set_item("engine", &info.engine)?;
    d.set_item("uses_cpu", info.uses_cpu)?;
    Ok(d)
}

/// Sets `report[key]` to `values` (one per device) as a dict keyed by device name, in device
/// order.
fn set_by_device<'py, T>(
    report: &Bound<'py, PyDict>,
    key: &str,
    devices: &[DeviceInfo],
    values: &[T],
) -> PyResult<()>
where
    T: Copy + IntoPyObject<'py>,
{
    let d = PyDict::new(report.py());
    for (info, &v) in devices.iter().zip(values) {
        d.set_item(&info.name, v)?;
    }
    report.set_item(key, d)
}

/// What a bulk AES run produced, before the GIL is taken back.
struct Bulk {
    outputs: Vec<Vec<u8>>,
    report: heloom_devices::RunReport,
    devices: Vec<DeviceInfo>,
    bytes: usize,
}

#[allow(clippy::too_many_arguments)]
fn bulk<'py>(
    py: Python<'py>,
    direction: Direction,
    items: &Bound<'py, PyAny>,
    key: &Bound<'py, PyAny>,
    ivs: Option<&Bound<'py, PyAny>>,
    cipher: &str,
    devices: &str,
    balancer: &str,
) -> PyResult<PyAesResult> {
    let cipher = Cipher::parse(cipher).map_err(device_to_py)?;
    let items = byte_items(items, "items")?;
    let key = as_bytes(key, &|| "key".to_string())?;
    if key.as_bytes().len() != cipher.key_len() {
        return Err(input_error(format!(
            "{} needs a {}-byte key, got {} bytes",
            cipher.name(),
            cipher.key_len(),
            key.as_bytes().len()
        )));
    }
    let ivs: Vec<Bound<'py, PyBytes>> = match ivs {
        Some(v) => byte_items(v, "ivs")?,
        None => aes::random_ivs(items.len())
            .iter()
            .map(|iv| PyBytes::new(py, iv))
            .collect(),
    };
    if ivs.len() != items.len() {
        return Err(input_error(format!(
            "{} IVs for {} items; give one IV per item",
            ivs.len(),
            items.len()
        )));
    }
    let iv_blocks = parse_ivs(&ivs, cipher)?;
    if cipher.is_gcm() && direction == Direction::Encrypt {
        let mut seen = HashSet::with_capacity(iv_blocks.len());
        if let Some(i) = iv_blocks.iter().position(|iv| !seen.insert(&iv[..NONCE])) {
            return Err(input_error(format!(
                "ivs[{i}] repeats an earlier item's GCM nonce (its first 12 bytes); a nonce used \
                 twice with one key breaks GCM: give every item its own IV, or leave ivs out \
                 for random ones"
            )));
        }
    }
    let specs = parse_specs(devices)?;
    let method = method_for(balancer, &device_names(&specs))?;
    let slices: Vec<&[u8]> = items.iter().map(|b| b.as_bytes()).collect();
    let key_bytes = key.as_bytes();
    let run = py.detach(|| -> Result<Bulk, DeviceError> {
        let devs = open_aes_devices(&specs)?;
        let work = AesWorkload::for_bulk(cipher, direction, key_bytes, iv_blocks, &slices)?;
        let refs: Vec<&dyn Device<AesWorkload>> = devs.iter().map(|d| d.as_ref()).collect();
        let out = Balancer::new(method).run(&refs, &work)?;
        Ok(Bulk {
            outputs: out.outputs,
            report: out.report,
            devices: devs.iter().map(|d| d.info().clone()).collect(),
            bytes: work.input_bytes(),
        })
    });
    let run = run.map_err(device_to_py)?;
    let report = PyDict::new(py);
    let r = &run.report;
    report.set_item("method", &r.method)?;
    report.set_item("cipher", cipher.name())?;
    report.set_item("direction", direction.name())?;
    report.set_item("items", run.outputs.len())?;
    report.set_item("bytes", run.bytes)?;
    report.set_item("ms", r.ms)?;
    let mb_per_s = if r.ms > 0.0 {
        run.bytes as f64 / (r.ms * 1e3)
    } else {
        0.0
    };
    report.set_item("mb_per_s", mb_per_s)?;
    report.set_item("claims", r.claims)?;
    let devs = PyList::empty(py);
    for info in &run.devices {
        devs.append(device_dict(py, info)?)?;
    }
    report.set_item("devices", devs)?;
    let names = &run.devices;
    set_by_device(&report, "items_per_device", names, &r.items_per_device)?;
    set_by_device(&report, "bytes_per_device", names, &r.weight_per_device)?;
    set_by_device(&report, "busy_ms_per_device", names, &r.busy_ms_per_device)?;
    set_by_device(
        &report,
        "finish_ms_per_device",
        names,
        &r.finish_ms_per_device,
    )?;
    Ok(PyAesResult {
        outputs: run
            .outputs
            .iter()
            .map(|o| PyBytes::new(py, o).unbind())
            .collect(),
        ivs: ivs.into_iter().map(Bound::unbind).collect(),
        report: report.unbind(),
    })
}

/// Encrypts many items ("files") under one ``key`` on several devices that pull from one
/// queue; returns an ``AesResult`` with the ciphertexts in item order, their IVs and a report.
///
/// ``cipher``: ``"aes-128-cbc"``, ``"aes-192-cbc"``, ``"aes-256-cbc"`` (PKCS#7 padding: each
/// ciphertext is 1 to 16 bytes longer than its item) or ``"aes-256-gcm"`` (12-byte nonce, the
/// 16-byte tag appended); the key has 16, 24, 32 or 32 bytes. Each item gets its own IV: 16
/// random bytes from the operating system's CSPRNG (GCM uses the first 12 as the nonce)
/// unless ``ivs`` gives one per item (to reproduce a result; never use a GCM nonce twice
/// with one key). ``devices``: a comma-separated list of ``cpu`` (AES-NI/VAES), ``soft``
/// (constant-time software AES), ``kernel`` (the Linux kernel crypto API) and ``gpu``, each
/// optionally ``:threads`` (see ``offload_devices()``). ``balancer``: ``"round-robin"``,
/// ``"polling"``, ``"pull"``, ``"heloom"`` (learned pull, the default), or a device's name
/// (``"cpu"``, ``"soft:1"``) to run on that device alone. Outputs are the same whichever
/// devices and balancer run. Bad arguments raise InputError (a ValueError), devices this
/// machine lacks DeviceUnavailableError. Runs without the GIL.
#[pyfunction]
#[pyo3(signature = (items, key, *, cipher = "aes-256-gcm", devices = "cpu,soft", balancer = "heloom", ivs = None))]
pub fn aes_encrypt<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyAny>,
    key: &Bound<'py, PyAny>,
    cipher: &str,
    devices: &str,
    balancer: &str,
    ivs: Option<&Bound<'py, PyAny>>,
) -> PyResult<PyAesResult> {
    bulk(
        py,
        Direction::Encrypt,
        items,
        key,
        ivs,
        cipher,
        devices,
        balancer,
    )
}

/// Decrypts many items encrypted by ``aes_encrypt`` (or any tool using the same modes: CBC
/// with PKCS#7 padding, or GCM with the 16-byte tag appended) under one ``key``, with the
/// ``ivs`` they were encrypted with (one per item; 12-byte nonces are accepted for GCM), on
/// several devices pulling from one queue. Returns an ``AesResult`` with the plaintexts in
/// item order. ``cipher``, ``devices`` and ``balancer`` as for ``aes_encrypt``. A wrong key
/// or IV, or a corrupted or tampered ciphertext (a GCM tag or CBC padding that does not
/// check), raises CryptoError naming the item; no partial results are returned. Runs without
/// the GIL.
#[pyfunction]
#[pyo3(signature = (items, key, *, ivs, cipher = "aes-256-gcm", devices = "cpu,soft", balancer = "heloom"))]
pub fn aes_decrypt<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyAny>,
    key: &Bound<'py, PyAny>,
    ivs: &Bound<'py, PyAny>,
    cipher: &str,
    devices: &str,
    balancer: &str,
) -> PyResult<PyAesResult> {
    bulk(
        py,
        Direction::Decrypt,
        items,
        key,
        Some(ivs),
        cipher,
        devices,
        balancer,
    )
}

/// One probe of `offload_devices`.
fn probe<'py>(
    py: Python<'py>,
    kind: DeviceKind,
    workload: &str,
    opened: Result<String, DeviceError>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("kind", kind.name())?;
    d.set_item("workload", workload)?;
    d.set_item("available", opened.is_ok())?;
    match opened {
        Ok(engine) => {
            d.set_item("engine", engine)?;
            d.set_item("error", py.None())?;
        }
        Err(e) => {
            d.set_item("engine", py.None())?;
            d.set_item("error", e.to_string())?;
        }
    }
    Ok(d)
}

/// The device kinds and whether this machine (and this build) can use them: a dict per kind
/// with ``kind`` (``"cpu"``, ``"soft"``, ``"kernel"``, ``"gpu"`` for AES items,
/// ``"cpu-pool"`` and ``"gpu"`` (heloom's CUDA backend) for HE jobs), ``workload`` (``"aes"`` or ``"he"``), ``available``,
/// ``engine`` (what runs the work, or None) and ``error`` (why it cannot be used and what to
/// do, or None). Each device is opened with one worker to find out.
#[pyfunction]
pub fn offload_devices(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let aes_kinds = [
        DeviceKind::Cpu,
        DeviceKind::Soft,
        DeviceKind::Kernel,
        DeviceKind::Gpu,
    ];
    let results: Vec<(DeviceKind, &str, Result<String, DeviceError>)> = py.detach(|| {
        let mut out: Vec<(DeviceKind, &str, Result<String, DeviceError>)> = aes_kinds
            .iter()
            .map(|&kind| (kind, "aes", engine_of(kind, open_aes_devices)))
            .collect();
        for kind in [DeviceKind::CpuPool, DeviceKind::Gpu] {
            out.push((kind, "he", engine_of(kind, open_he_devices)));
        }
        out
    });
    results
        .into_iter()
        .map(|(kind, workload, r)| probe(py, kind, workload, r))
        .collect()
}

/// What opens devices of one workload from their specs ([`open_aes_devices`],
/// [`open_he_devices`]).
type Opener<W> = fn(&[DeviceSpec]) -> Result<Vec<Box<dyn Device<W>>>, DeviceError>;

/// The engine of a `kind` device opened by `open` with one worker, or why it cannot be opened.
fn engine_of<W: Workload>(kind: DeviceKind, open: Opener<W>) -> Result<String, DeviceError> {
    let spec = [DeviceSpec {
        kind,
        workers: Some(1),
    }];
    open(&spec).and_then(|d| {
        d.first()
            .map(|d| d.info().engine.clone())
            .ok_or_else(|| DeviceError::InvalidParameter("no device opened".into()))
    })
}

/// A non-negative integer argument, else InputError.
fn count(v: i64, what: &str, min: i64) -> PyResult<usize> {
    if v < min {
        return Err(input_error(format!(
            "{what} must be at least {min}, got {v}"
        )));
    }
    usize::try_from(v).map_err(|_| input_error(format!("{what} is too large: {v}")))
}

fn methods(names: &[String]) -> PyResult<Vec<Method>> {
    names
        .iter()
        .map(|m| Method::parse(m).map_err(device_to_py))
        .collect()
}

/// Serialises `value` to JSON and reads it back with Python's `json` module (field order kept).
pub(crate) fn to_python<'py, T: Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| HeloomError::new_err(format!("cannot serialise the report: {e}")))?;
    py.import("json")?.getattr("loads")?.call1((text,))
}

/// Calls a Python progress callback from a thread without the GIL; the first exception it
/// raises stops further calls and is re-raised when the run ends.
struct Progress {
    callback: Option<Py<PyAny>>,
    error: Option<PyErr>,
}

impl Progress {
    fn new(callback: Option<Py<PyAny>>) -> Self {
        Progress {
            callback,
            error: None,
        }
    }

    fn call(&mut self, label: &str, done: usize, total: usize) {
        if self.error.is_some() {
            return;
        }
        if let Some(cb) = &self.callback {
            let r = Python::attach(|py| cb.call1(py, (label, done, total)).map(drop));
            if let Err(e) = r {
                self.error = Some(e);
            }
        }
    }

    fn finish(self) -> PyResult<()> {
        self.error.map_or(Ok(()), Err)
    }
}

/// Runs the comparison `run` on the devices listed in `devices` without the GIL, calling
/// `progress` after every run, and returns its result as Python objects.
fn run_compare<'py, T, F>(
    py: Python<'py>,
    devices: &str,
    progress: Option<Py<PyAny>>,
    run: F,
) -> PyResult<Bound<'py, PyAny>>
where
    T: Serialize + Send,
    F: FnOnce(&[DeviceSpec], &mut dyn FnMut(&str, usize, usize)) -> Result<T, DeviceError> + Send,
{
    let specs = parse_specs(devices)?;
    let mut progress = Progress::new(progress);
    let out = py
        .detach(|| {
            run(&specs, &mut |label, done, total| {
                progress.call(label, done, total)
            })
        })
        .map_err(device_to_py)?;
    progress.finish()?;
    to_python(py, &out)
}

/// Times every device alone and every balancer in ``methods`` on the same AES workloads (seed
/// 001's Tables 2 and 3): for each item size in ``sizes`` a queue of ``items`` items of that
/// size, and with ``mixed`` one more queue holding ``items / len(sizes)`` items of every size,
/// shuffled. Each method runs ``reps`` times after an untimed warm-up, in rotating order; the
/// ideal combined time is ``1 / sum(1 / T_d)`` over the single devices and each method's
/// efficiency is ideal / measured. Every output of every run is checked against the reference
/// engine. ``progress(label, done, total)``, when given, is called after every run.
///
/// Returns a dict: ``devices`` (name, kind, workers, engine, uses_cpu), ``cipher``,
/// ``direction``, ``items``, ``reps`` and ``runs``, one dict per method and workload:
/// ``method``, ``single``, ``cipher``, ``direction``, ``size`` (0 for the mixed queue),
/// ``workload`` (``"uniform"`` or ``"mixed"``), ``items``, ``ms`` (best of the repetitions, the
/// statistic ``efficiency`` uses), ``ms_mean``, ``ms_median``, ``ms_min``,
/// ``ms_max``, ``ms_reps``, ``ideal_ms``, ``efficiency``, ``mb_per_s``, ``items_per_device``
/// and ``finish_ms_per_device`` (keyed by device name) and ``claims``. Runs without the GIL.
#[pyfunction]
#[pyo3(signature = (
    *,
    devices = "cpu,soft",
    cipher = "aes-128-cbc",
    direction = "encrypt",
    sizes = vec![8, 16, 64, 256, 1024, 4096, 8192, 16384],
    items = 4000,
    reps = 5,
    methods = vec![
        "round-robin".to_string(),
        "polling".to_string(),
        "pull".to_string(),
        "heloom".to_string(),
    ],
    mixed = true,
    seed = 1,
    progress = None,
),
text_signature = "(*, devices='cpu,soft', cipher='aes-128-cbc', direction='encrypt', \
    sizes=(8, 16, 64, 256, 1024, 4096, 8192, 16384), items=4000, reps=5, \
    methods=('round-robin', 'polling', 'pull', 'heloom'), mixed=True, seed=1, progress=None)")]
#[allow(clippy::too_many_arguments)]
pub fn offload_compare<'py>(
    py: Python<'py>,
    devices: &str,
    cipher: &str,
    direction: &str,
    sizes: Vec<i64>,
    items: i64,
    reps: i64,
    methods: Vec<String>,
    mixed: bool,
    seed: u64,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let cipher = Cipher::parse(cipher).map_err(device_to_py)?;
    let direction = match direction.trim().to_ascii_lowercase().as_str() {
        "encrypt" => Direction::Encrypt,
        "decrypt" => Direction::Decrypt,
        other => {
            return Err(input_error(format!(
                "unknown direction {other:?}; choose \"encrypt\" or \"decrypt\""
            )))
        }
    };
    if sizes.is_empty() {
        return Err(input_error("sizes must list at least one item size"));
    }
    let sizes = sizes
        .iter()
        .map(|&s| {
            let s = count(s, "every item size", 0)?;
            if s > aes::MAX_ITEM {
                return Err(input_error(format!(
                    "item size {s} is larger than the {}-byte limit",
                    aes::MAX_ITEM
                )));
            }
            Ok(s)
        })
        .collect::<PyResult<Vec<usize>>>()?;
    let cfg = CompareConfig {
        cipher,
        direction,
        sizes,
        items: count(items, "items", 1)?,
        reps: count(reps, "reps", 1)?,
        methods: self::methods(&methods)?,
        mixed,
        seed,
    };
    run_compare(py, devices, progress, |specs, progress| {
        let devs = open_aes_devices(specs)?;
        let refs: Vec<&dyn Device<AesWorkload>> = devs.iter().map(|d| d.as_ref()).collect();
        compare(&refs, &cfg, progress)
    })
}

/// Runs a stream of ``jobs`` e^x jobs (the runtime's HE task graphs, each on its own encrypted
/// input, at ring degree ``2**log_n`` with 8 RNS limbs) on every device alone and under every
/// balancer in ``methods``, ``reps`` times after an untimed warm-up. ``devices``: a list of
/// ``cpu-pool:threads`` shares of heloom's thread pool (``cpu:t`` means the same) and ``gpu``
/// (heloom's CUDA backend; DeviceUnavailableError where there is no GPU). ``variant``: ``"paper-fig3"``,
/// ``"bsgs"``, ``"horner"`` or ``"mixed"`` (the three in turn, so jobs differ in weight).
/// Every result is decrypted and checked against e^x. ``progress(label, done, total)``, when
/// given, is called after every run.
///
/// Returns one dict per method: ``method``, ``single``, ``log_n``, ``jobs``, ``ms`` (mean),
/// ``ms_reps``, ``ideal_ms``, ``efficiency``, ``jobs_per_s``, ``items_per_device`` (keyed by
/// device name) and ``max_error`` (the largest decryption error of any job). Runs without the
/// GIL.
#[pyfunction]
#[pyo3(signature = (
    *,
    devices = "cpu-pool:1,cpu-pool:1",
    log_n = 12,
    jobs = 12,
    reps = 2,
    variant = "mixed",
    methods = vec![
        "round-robin".to_string(),
        "polling".to_string(),
        "pull".to_string(),
        "heloom".to_string(),
    ],
    seed = 1,
    progress = None,
),
text_signature = "(*, devices='cpu-pool:1,cpu-pool:1', log_n=12, jobs=12, reps=2, \
    variant='mixed', methods=('round-robin', 'polling', 'pull', 'heloom'), seed=1, \
    progress=None)")]
#[allow(clippy::too_many_arguments)]
pub fn he_offload_compare<'py>(
    py: Python<'py>,
    devices: &str,
    log_n: i64,
    jobs: i64,
    reps: i64,
    variant: &str,
    methods: Vec<String>,
    seed: u64,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let log_n = u32::try_from(log_n)
        .map_err(|_| input_error(format!("log_n must be between 10 and 16, got {log_n}")))?;
    let cfg = HeCompareConfig {
        log_n,
        jobs: count(jobs, "jobs", 1)?,
        reps: count(reps, "reps", 1)?,
        variant: parse_variant(variant).map_err(device_to_py)?,
        methods: self::methods(&methods)?,
        seed,
    };
    run_compare(py, devices, progress, |specs, progress| {
        let devs = open_he_devices(specs)?;
        let refs: Vec<&dyn Device<heloom_devices::he::HeJobs>> =
            devs.iter().map(|d| d.as_ref()).collect();
        compare_he(&refs, &cfg, progress)
    })
}

/// Registers the class and functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAesResult>()?;
    m.add_function(wrap_pyfunction!(aes_encrypt, m)?)?;
    m.add_function(wrap_pyfunction!(aes_decrypt, m)?)?;
    m.add_function(wrap_pyfunction!(offload_devices, m)?)?;
    m.add_function(wrap_pyfunction!(offload_compare, m)?)?;
    m.add_function(wrap_pyfunction!(he_offload_compare, m)?)?;
    Ok(())
}
