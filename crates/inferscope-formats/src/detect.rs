//! Recognise which tool wrote a file, from its content alone (pastes have no useful names).
//! `snapshot --import` uses it to pick the parser, and every `--snapshot FILE` reader to explain
//! a file that is another tool's output.

use crate::nvidia_smi_topo;

/// How much of the start of a file is looked at.
pub const HEAD_CHARS: usize = 4096;

/// What a file was recognised as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `nvidia-smi -q` text.
    NvidiaSmiText,
    /// `nvidia-smi -q -x` XML.
    NvidiaSmiXml,
    /// hwloc XML (`lstopo --of xml`).
    HwlocXml,
    /// `nvidia-smi topo -m` text.
    NvidiaSmiTopo,
    /// A snapshot written by `inferscope snapshot`.
    Snapshot,
}

/// Recognise a file's format from its first [`HEAD_CHARS`] characters; `None` when it is none
/// of the formats inferscope reads.
pub fn detect(text: &str) -> Option<Format> {
    let head: String = text.chars().take(HEAD_CHARS).collect();
    if head.contains("<nvidia_smi_log") {
        Some(Format::NvidiaSmiXml)
    } else if head.contains("<topology") {
        Some(Format::HwlocXml)
    } else if head.trim_start().starts_with('{') && head.contains("\"schema_version\"") {
        Some(Format::Snapshot)
    } else if head.contains("NVSMI LOG")
        || head.contains("Attached GPUs")
        || head.lines().any(|l| l.trim_start().starts_with("GPU 0000"))
    {
        Some(Format::NvidiaSmiText)
    } else if nvidia_smi_topo::has_matrix_header(&head) {
        Some(Format::NvidiaSmiTopo)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture's tool output, without its `# Source:` header.
    fn fixture(path: &str) -> String {
        let text = std::fs::read_to_string(format!(
            "{}/../../fixtures/tools/{path}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        match text.split_once("\n---\n") {
            Some((head, body)) if head.starts_with("# Source:") => body.to_string(),
            _ => text,
        }
    }

    #[test]
    fn detects_formats_from_content() {
        assert_eq!(
            detect("<?xml version=\"1.0\"?>\n<nvidia_smi_log>"),
            Some(Format::NvidiaSmiXml)
        );
        assert_eq!(
            detect(
                "<?xml version=\"1.0\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">"
            ),
            Some(Format::HwlocXml)
        );
        assert_eq!(
            detect("\n==============NVSMI LOG==============\n"),
            Some(Format::NvidiaSmiText)
        );
        assert_eq!(
            detect("\tGPU0\tGPU1\tCPU Affinity\n"),
            Some(Format::NvidiaSmiTopo)
        );
        assert_eq!(detect("{\n  \"schema_version\": 1"), Some(Format::Snapshot));
        assert_eq!(detect("hello"), None);
        assert_eq!(detect(""), None);
    }

    #[test]
    fn every_real_tool_output_is_recognised() {
        // Every fixture the parsers accept (it has an `.expected.json`) is detected as its tool.
        let dir = format!("{}/../../fixtures/tools", env!("CARGO_MANIFEST_DIR"));
        let mut seen = 0;
        for sub in ["nvidia-smi-topo", "nvidia-smi-q", "hwloc"] {
            for e in std::fs::read_dir(format!("{dir}/{sub}")).unwrap() {
                let name = e.unwrap().file_name().to_string_lossy().to_string();
                let Some(stem) = name.strip_suffix(".expected.json") else {
                    continue;
                };
                let (input, want) = match sub {
                    "nvidia-smi-topo" => (format!("{stem}.txt"), Format::NvidiaSmiTopo),
                    "hwloc" => (format!("{stem}.xml"), Format::HwlocXml),
                    _ if stem.contains("-x-xml") => (format!("{stem}.txt"), Format::NvidiaSmiXml),
                    _ => (format!("{stem}.txt"), Format::NvidiaSmiText),
                };
                assert_eq!(
                    detect(&fixture(&format!("{sub}/{input}"))),
                    Some(want),
                    "{sub}/{input}"
                );
                seen += 1;
            }
        }
        assert!(seen >= 20, "only {seen} fixtures");
    }

    #[test]
    fn text_that_only_mentions_gpu0_is_not_a_matrix() {
        // An Xid line from dmesg and an OOM message both mention GPU0 (fixtures/tools/oom/).
        assert_eq!(
            detect("NVRM: Xid (PCI:0000:17:00): 79, GPU0 has fallen off the bus.\n"),
            None
        );
        assert_eq!(
            detect(
                "torch.OutOfMemoryError: CUDA out of memory. GPU0 has a total capacity of 79.11 GiB\n"
            ),
            None
        );
    }

    #[test]
    fn only_the_head_is_read() {
        let late = format!(
            "{}\n==============NVSMI LOG==============\n",
            " ".repeat(HEAD_CHARS)
        );
        assert_eq!(detect(&late), None);
    }
}
