"""heloom.offload: work shared among devices that pull from one queue (seed 001).

``aes_encrypt`` and ``aes_decrypt`` run bulk AES (CBC or GCM) of many items over several
devices (``"cpu,soft"``: AES-NI and constant-time software AES; ``kernel``: the Linux kernel
crypto API) under a balancer and return an ``AesResult`` (outputs, IVs, report).
``offload_devices()`` says which devices this machine has; ``offload_compare`` times every
device and balancer on AES items (the paper's tables) and ``he_offload_compare`` on a stream
of HE jobs.
"""

from heloom._heloom import (
    AesResult,
    CryptoError,
    DeviceUnavailableError,
    aes_decrypt,
    aes_encrypt,
    he_offload_compare,
    offload_compare,
    offload_devices,
)

__all__ = [
    "AesResult",
    "CryptoError",
    "DeviceUnavailableError",
    "aes_decrypt",
    "aes_encrypt",
    "he_offload_compare",
    "offload_compare",
    "offload_devices",
]
