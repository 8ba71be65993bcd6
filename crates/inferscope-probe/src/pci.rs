//! The PCI tree from `/sys/bus/pci/devices`, and the GPUs and NICs in it.
//!
//! Each entry of `/sys/bus/pci/devices` is a symlink into `/sys/devices/pciDDDD:BB/...`; the
//! directories on the way down are the bridges (root port, switch ports) the device sits behind,
//! and the first one names the host bridge. That path is all the topology queries need.

use crate::fsroot::FsRoot;
use inferscope_formats::hwloc_xml::decode_cpuset;
use inferscope_formats::sysfs;
use inferscope_host::{
    CpuSet, Gpu, GpuVendor, LinkSpeed, Nic, NumaNodeId, PciBusId, PciClass, PciDevice, PciId,
    PcieLink, Reading, UnknownReason,
};

const DEVICES: &str = "sys/bus/pci/devices";

/// PCI vendor ids.
pub mod vendor {
    /// NVIDIA.
    pub const NVIDIA: u16 = 0x10de;
    /// AMD/ATI graphics.
    pub const AMD: u16 = 0x1002;
    /// Mellanox (NVIDIA networking).
    pub const MELLANOX: u16 = 0x15b3;
    /// Broadcom.
    pub const BROADCOM: u16 = 0x14e4;
    /// Intel.
    pub const INTEL: u16 = 0x8086;
}

fn link_speed(fs: &FsRoot, rel: &str) -> Reading<LinkSpeed> {
    fs.parse(rel, sysfs::parse_link_speed)
        .and_then(|s| match s {
            sysfs::LinkSpeed::GigaTransfers { tenths } => Reading::value(LinkSpeed {
                gt_per_s_tenths: tenths,
            }),
            sysfs::LinkSpeed::Unknown => Reading::unknown(
                UnknownReason::NotReported,
                format!("/{rel} reads \"Unknown\""),
            ),
        })
}

fn numa_node(fs: &FsRoot, dir: &str) -> Reading<NumaNodeId> {
    let rel = format!("{dir}/numa_node");
    fs.parse(&rel, sysfs::parse_i64)
        .and_then(|n| match u32::try_from(n) {
            Ok(id) => Reading::value(NumaNodeId(id)),
            Err(_) => Reading::unknown(
                UnknownReason::NotReported,
                format!("/{rel} reads {n}: the firmware gives no NUMA locality for this device"),
            ),
        })
}

fn read_device(fs: &FsRoot, name: &str, problems: &mut Vec<String>) -> Option<PciDevice> {
    let bus_id: PciBusId = match name.parse() {
        Ok(id) => id,
        Err(e) => {
            problems.push(format!("/{DEVICES}/{name}: {e}"));
            return None;
        }
    };
    let entry = format!("{DEVICES}/{name}");
    let dir = match fs.resolve_link(&entry) {
        Ok(d) => d,
        // A reduced gather (hwloc's trees) stores the device as a plain directory: its files
        // are there, the bridges above it are not. hwloc then puts it under a host bridge of
        // its own bus; so do we, and say so.
        Err(_) if fs.is_plain_dir(&entry) => {
            problems.push(format!(
                "/{entry} is a directory, not a link into /sys/devices: the bridges above it are unknown; host bridge taken from its bus number"
            ));
            return Some(device_at(
                fs,
                bus_id,
                &entry,
                format!("pci{:04x}:{:02x}", bus_id.domain, bus_id.bus),
                Vec::new(),
            ));
        }
        Err(e) => {
            problems.push(e.to_string());
            return None;
        }
    };
    // sys/devices/[platform/...]/pciDDDD:BB/<bridge>/<bridge>/<device>
    let is_host_bridge = |p: &str| {
        p.strip_prefix("pci").is_some_and(|rest| {
            rest.contains(':')
                && rest
                    .split(':')
                    .all(|x| !x.is_empty() && x.chars().all(|c| c.is_ascii_hexdigit()))
        })
    };
    // Components from the first host bridge on: the bridge itself, then the chain below it.
    let mut from_rc = dir.split('/').skip_while(|p| !is_host_bridge(p));
    let Some(rc) = from_rc.next() else {
        problems.push(format!(
            "/{DEVICES}/{name} -> /{dir}: no pciDDDD:BB host bridge in the path"
        ));
        return None;
    };
    let root_complex = rc.to_string();
    let chain: Vec<PciBusId> = from_rc.filter_map(|p| p.parse::<PciBusId>().ok()).collect();
    let upstream_bridges = match chain.split_last() {
        Some((last, up)) if *last == bus_id => up.to_vec(),
        _ => {
            problems.push(format!(
                "/{DEVICES}/{name} -> /{dir}: path does not end at the device"
            ));
            return None;
        }
    };
    Some(device_at(fs, bus_id, &dir, root_complex, upstream_bridges))
}

/// CPUs local to a device: `local_cpulist`, else the `local_cpus` mask (older kernels and
/// reduced gathers have only the mask; hwloc reads the mask).
fn local_cpus(fs: &FsRoot, dir: &str) -> Reading<CpuSet> {
    match fs.read_string(&format!("{dir}/local_cpulist")) {
        Ok(t) => match t.parse::<CpuSet>() {
            Ok(s) => Reading::value(s),
            Err(e) => Reading::unknown(
                UnknownReason::Malformed,
                format!("/{dir}/local_cpulist: line 1, {e}"),
            ),
        },
        Err(e) if e.reason == UnknownReason::NotPresent => {
            let rel = format!("{dir}/local_cpus");
            match fs.read_string(&rel) {
                Ok(t) => match decode_cpuset(t.trim()) {
                    Ok(s) => Reading::value(s),
                    Err(e) => {
                        Reading::unknown(UnknownReason::Malformed, format!("/{rel}: line 1, {e}"))
                    }
                },
                Err(_) => e.into_reading(),
            }
        }
        Err(e) => e.into_reading(),
    }
}

/// The facts of a device whose sysfs directory is `dir`.
fn device_at(
    fs: &FsRoot,
    bus_id: PciBusId,
    dir: &str,
    root_complex: String,
    upstream_bridges: Vec<PciBusId>,
) -> PciDevice {
    let driver = match fs.resolve_link(&format!("{dir}/driver")) {
        Ok(target) => Reading::value(target.rsplit('/').next().unwrap_or_default().to_string()),
        Err(e) if e.reason == UnknownReason::NotPresent => Reading::unknown(
            UnknownReason::NotPresent,
            format!("/{dir}/driver: no driver bound"),
        ),
        Err(e) => e.into_reading(),
    };
    PciDevice {
        bus_id,
        root_complex,
        upstream_bridges,
        vendor_id: fs
            .parse(&format!("{dir}/vendor"), sysfs::parse_hex_u16)
            .map(PciId),
        device_id: fs
            .parse(&format!("{dir}/device"), sysfs::parse_hex_u16)
            .map(PciId),
        class: fs
            .parse(&format!("{dir}/class"), sysfs::parse_hex_u32)
            .map(PciClass),
        driver,
        numa_node: numa_node(fs, dir),
        local_cpus: local_cpus(fs, dir),
        link: PcieLink {
            current_speed: link_speed(fs, &format!("{dir}/current_link_speed")),
            current_width: fs.parse(&format!("{dir}/current_link_width"), sysfs::parse_u32),
            max_speed: link_speed(fs, &format!("{dir}/max_link_speed")),
            max_width: fs.parse(&format!("{dir}/max_link_width"), sysfs::parse_u32),
        },
    }
}

/// Sysfs directory of a device (resolved), for reading its `net/` and `infiniband/` children.
fn device_dir(fs: &FsRoot, bus_id: &PciBusId) -> Option<String> {
    let entry = format!("{DEVICES}/{bus_id}");
    fs.resolve_link(&entry)
        .ok()
        .or_else(|| fs.is_plain_dir(&entry).then_some(entry))
}

/// Read every PCI function, sorted by bus id.
pub fn probe_pci(fs: &FsRoot, problems: &mut Vec<String>) -> Vec<PciDevice> {
    let names = match fs.list_dir(DEVICES) {
        Ok(n) => n,
        Err(e) => {
            problems.push(e.to_string());
            return Vec::new();
        }
    };
    let mut devices: Vec<PciDevice> = names
        .iter()
        .filter_map(|n| read_device(fs, n, problems))
        .collect();
    devices.sort_by_key(|d| d.bus_id);
    devices
}

/// GPUs: NVIDIA or AMD display controllers (class 0x03xxxx), in bus order.
pub fn gpus(devices: &[PciDevice]) -> Vec<Gpu> {
    devices
        .iter()
        .filter_map(|d| {
            if d.class.known()?.base() != 0x03 {
                return None;
            }
            let vendor = match d.vendor_id.known()?.0 {
                vendor::NVIDIA => GpuVendor::Nvidia,
                vendor::AMD => GpuVendor::Amd,
                _ => return None,
            };
            Some(Gpu {
                pci_bus_id: d.bus_id,
                vendor,
                device_id: d.device_id.clone(),
                numa_node: d.numa_node.clone(),
                local_cpus: d.local_cpus.clone(),
                details: inferscope_host::not_captured(),
            })
        })
        .collect()
}

/// NICs worth a row in the GPU/NIC matrix: network or InfiniBand controllers (class 0x02xxxx)
/// from Mellanox/NVIDIA, Broadcom or Intel that expose an RDMA device (Mellanox always counts).
/// Plain management Ethernet ports are left out, as `nvidia-smi topo -m` leaves them out.
pub fn nics(fs: &FsRoot, devices: &[PciDevice]) -> Vec<Nic> {
    devices
        .iter()
        .filter_map(|d| {
            let vendor_id = *d.vendor_id.known()?;
            if d.class.known()?.base() != 0x02
                || ![vendor::MELLANOX, vendor::BROADCOM, vendor::INTEL].contains(&vendor_id.0)
            {
                return None;
            }
            let dir = device_dir(fs, &d.bus_id)?;
            let rdma_devices = fs
                .list_dir(&format!("{dir}/infiniband"))
                .unwrap_or_default();
            let net_devices = fs.list_dir(&format!("{dir}/net")).unwrap_or_default();
            if rdma_devices.is_empty() && vendor_id.0 != vendor::MELLANOX {
                return None;
            }
            Some(Nic {
                pci_bus_id: d.bus_id,
                vendor_id,
                rdma_devices,
                net_devices,
                numa_node: d.numa_node.clone(),
            })
        })
        .collect()
}
