//! Numbering schemes, each its own type.
//!
//! A GPU has at least four names: its PCI bus id (stable, physical), its NVML index (driver
//! enumeration, PCI order), its CUDA ordinal (depends on `CUDA_DEVICE_ORDER` and
//! `CUDA_VISIBLE_DEVICES`) and its UUID. Mixing them up is how `CUDA_VISIBLE_DEVICES=1` ends up
//! on the wrong card, so they never share a type.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Error for an identifier that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {text:?}: {why}")]
pub struct IdError {
    /// Which identifier (e.g. "PCI bus id").
    pub kind: &'static str,
    /// The text that failed (truncated).
    pub text: String,
    /// What was wrong.
    pub why: &'static str,
}

fn id_error(kind: &'static str, text: &str, why: &'static str) -> IdError {
    IdError {
        kind,
        text: text.chars().take(40).collect(),
        why,
    }
}

/// A PCI address `domain:bus:device.function`, printed as Linux does (`0000:17:00.0`).
///
/// Parses both the Linux form and NVML's 8-digit domain form (`00000000:17:00.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciBusId {
    /// PCI segment group (domain).
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device (slot) number, 0..=31.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

impl FromStr for PciBusId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        const KIND: &str = "PCI bus id";
        let t = s.trim();
        let (rest, function) = t
            .rsplit_once('.')
            .ok_or_else(|| id_error(KIND, s, "missing '.function'"))?;
        let mut parts = rest.split(':');
        let (domain, bus, device) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(d), Some(b), Some(dev), None) => (d, b, dev),
            (Some(b), Some(dev), None, None) => ("0", b, dev),
            _ => return Err(id_error(KIND, s, "expected DDDD:BB:DD.F")),
        };
        let hex = |x: &str, max_len: usize| -> Result<u32, IdError> {
            if x.is_empty() || x.len() > max_len || !x.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(id_error(KIND, s, "non-hex or over-long field"));
            }
            u32::from_str_radix(x, 16).map_err(|_| id_error(KIND, s, "non-hex field"))
        };
        let domain = hex(domain, 8)?;
        let bus = hex(bus, 2)?;
        let device = hex(device, 2)?;
        let function = hex(function, 1)?;
        if device > 31 || function > 7 {
            return Err(id_error(KIND, s, "device must be <= 1f and function <= 7"));
        }
        Ok(PciBusId {
            domain,
            bus: bus as u8,
            device: device as u8,
            function: function as u8,
        })
    }
}

impl fmt::Display for PciBusId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

serde_as_string!(PciBusId);

macro_rules! index_newtype {
    ($(#[$doc:meta])* $name:ident, $label:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                s.trim()
                    .parse::<u32>()
                    .map($name)
                    .map_err(|_| id_error($label, s, "expected a non-negative integer"))
            }
        }
    };
}

index_newtype!(
    /// A Linux NUMA node number (`/sys/devices/system/node/nodeN`), hwloc's os_index.
    NumaNodeId,
    "NUMA node id"
);
index_newtype!(
    /// NVML's device index (`nvidia-smi -i N`); follows PCI bus order.
    NvmlIndex,
    "NVML index"
);
index_newtype!(
    /// A CUDA device ordinal as a process sees it; depends on `CUDA_DEVICE_ORDER` and
    /// `CUDA_VISIBLE_DEVICES`.
    CudaOrdinal,
    "CUDA ordinal"
);

/// A GPU UUID as NVML prints it (`GPU-xxxxxxxx-...`, or `MIG-...` for MIG instances).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GpuUuid(pub String);

impl fmt::Display for GpuUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_bus_id_linux_and_nvml_forms() {
        let a: PciBusId = "0000:17:00.0".parse().unwrap();
        let b: PciBusId = "00000000:17:00.0".parse().unwrap();
        assert_eq!(a, b);
        assert_eq!(b.to_string(), "0000:17:00.0");
        let c: PciBusId = "0001:C1:1f.7".parse().unwrap();
        assert_eq!(c.to_string(), "0001:c1:1f.7");
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"0001:c1:1f.7\"");
    }

    #[test]
    fn pci_bus_id_rejects_garbage() {
        for bad in [
            "",
            "17:00",
            "0000:17:20.0",
            "0000:17:00.8",
            "zz:00.0",
            "0000:0:0:0.0",
            "0000:117:00.0",
        ] {
            assert!(bad.parse::<PciBusId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn index_types_are_distinct_and_transparent() {
        let n: NumaNodeId = "1".parse().unwrap();
        assert_eq!(serde_json::to_string(&n).unwrap(), "1");
        assert!("-1".parse::<NumaNodeId>().is_err());
    }
}

macro_rules! hex_newtype {
    ($(#[$doc:meta])* $name:ident, $int:ty, $width:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub $int);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "0x{:0w$x}", self.0, w = $width)
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                let t = s.trim();
                let digits = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
                <$int>::from_str_radix(digits, 16)
                    .map($name)
                    .map_err(|_| id_error(stringify!($name), s, "expected a hex number like 0x10de"))
            }
        }

        serde_as_string!($name);
    };
}

hex_newtype!(
    /// A 16-bit PCI vendor or device id, printed as lspci does (`0x10de`).
    PciId,
    u16,
    4
);
hex_newtype!(
    /// A 24-bit PCI class code (class, subclass, prog-if), printed as sysfs does (`0x030200`).
    PciClass,
    u32,
    6
);

impl PciClass {
    /// The base class byte (0x03 display, 0x02 network, 0x06 bridge).
    pub fn base(&self) -> u8 {
        (self.0 >> 16) as u8
    }
    /// Base class and subclass (0x0604 = PCI-to-PCI bridge).
    pub fn class_and_subclass(&self) -> u16 {
        (self.0 >> 8) as u16
    }
}
