//! `/proc/cpuinfo`.
//!
//! The file is a series of blank-line-separated blocks of `key : value` lines whose keys
//! differ by architecture, so we keep only what inferscope reports: the processor count,
//! x86's `model name`, and for ARM (no model name) an implementer/part hint. Lines without
//! ':' are skipped; a `processor` value that is not a number is an error.

use crate::error::ParseError;
use crate::lex::{chars_before, unsigned};

/// Summary of `/proc/cpuinfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuInfo {
    /// The first non-empty `model name` (x86, 32-bit ARM); `None` on aarch64.
    pub model_name: Option<String>,
    /// Number of `processor` entries (logical CPUs listed).
    pub processors: usize,
    /// For ARM: `aarch64: implementer 0x41 part 0xd4f` (or `armv7: …` when `CPU
    /// architecture` is not 8), from the first block that has `CPU implementer`.
    pub architecture_hint: Option<String>,
}

/// Parses `/proc/cpuinfo`.
pub fn parse(text: &str) -> Result<CpuInfo, ParseError> {
    let mut info = CpuInfo::default();
    let mut implementer: Option<String> = None;
    let mut part: Option<String> = None;
    let mut arch: Option<String> = None;
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        let Some((raw_key, raw_value)) = line.split_once(':') else {
            continue;
        };
        let key = raw_key.trim();
        let value = raw_value.trim();
        match key {
            "processor" => {
                let lead = raw_value.len() - raw_value.trim_start().len();
                let byte = raw_key.len() + 1 + lead;
                let col = chars_before(line, byte) + 1;
                let _: u32 = unsigned(value, line_no, col, "a processor number")?;
                info.processors += 1;
            }
            "model name" if info.model_name.is_none() && !value.is_empty() => {
                info.model_name = Some(value.to_owned());
            }
            "CPU implementer" if implementer.is_none() => implementer = Some(value.to_owned()),
            "CPU part" if part.is_none() => part = Some(value.to_owned()),
            "CPU architecture" if arch.is_none() => arch = Some(value.to_owned()),
            _ => {}
        }
    }
    if let Some(imp) = implementer {
        let family = match arch.as_deref() {
            None | Some("8") | Some("AArch64") => "aarch64".to_owned(),
            Some(other) => format!("armv{other}"),
        };
        let mut hint = format!("{family}: implementer {imp}");
        if let Some(p) = part {
            hint.push_str(" part ");
            hint.push_str(&p);
        }
        info.architecture_hint = Some(hint);
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real first block of `/proc/cpuinfo` from this machine (AMD EPYC VM), plus a second
    /// abbreviated block so the count is exercised.
    const X86: &str = "\
processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
stepping	: 1
microcode	: 0x1000065
cpu MHz		: 2596.128
cache size	: 1024 KB
physical id	: 0
siblings	: 2
core id		: 0
cpu cores	: 2
flags		: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr avx512f avx512_bf16
bugs		: sysret_ss_attrs null_seg spectre_v1 spectre_v2 spec_store_bypass srso
bogomips	: 5192.25
TLB size	: 3584 4K pages
address sizes	: 48 bits physical, 48 bits virtual
power management:

processor	: 1
vendor_id	: AuthenticAMD
model name	: AMD EPYC
power management:
";

    /// Models an NVIDIA Grace (Neoverse V2, part 0xd4f) aarch64 host: no `model name`.
    const GRACE: &str = "\
processor	: 0
BogoMIPS	: 2000.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x0
CPU part	: 0xd4f
CPU revision	: 0

processor	: 1
BogoMIPS	: 2000.00
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x0
CPU part	: 0xd4f
CPU revision	: 0
";

    /// Models a Raspberry Pi OS 32-bit kernel (armv7l): both `model name` and implementer,
    /// trailing `Hardware`/`Serial` block, no trailing newline.
    const ARMV7: &str = "\
processor	: 0
model name	: ARMv7 Processor rev 3 (v7l)
BogoMIPS	: 108.00
CPU implementer	: 0x41
CPU architecture: 7
CPU part	: 0xd08

Hardware	: BCM2711
Revision	: c03111";

    #[test]
    fn x86() {
        let c = parse(X86).unwrap();
        assert_eq!(c.model_name.as_deref(), Some("AMD EPYC"));
        assert_eq!(c.processors, 2);
        assert_eq!(c.architecture_hint, None);
    }

    #[test]
    fn aarch64_grace() {
        let c = parse(GRACE).unwrap();
        assert_eq!(c.model_name, None);
        assert_eq!(c.processors, 2);
        assert_eq!(
            c.architecture_hint.as_deref(),
            Some("aarch64: implementer 0x41 part 0xd4f")
        );
    }

    #[test]
    fn armv7() {
        let c = parse(ARMV7).unwrap();
        assert_eq!(c.model_name.as_deref(), Some("ARMv7 Processor rev 3 (v7l)"));
        assert_eq!(c.processors, 1);
        assert_eq!(
            c.architecture_hint.as_deref(),
            Some("armv7: implementer 0x41 part 0xd08")
        );
    }

    #[test]
    fn lenient_lines() {
        let c = parse("garbage without colon\n\nprocessor : 0\nmodel name :\n").unwrap();
        assert_eq!(c.processors, 1);
        assert_eq!(c.model_name, None);
        assert_eq!(parse("").unwrap(), CpuInfo::default());
    }

    #[test]
    fn bad_processor_number() {
        let e = parse("processor\t: 0\n\nprocessor\t: one\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 3, column 13: expected a processor number, found one"
        );
        let e = parse("processor :").unwrap_err();
        assert_eq!(e.found, "end of line");
    }
}
