//! Hidden `inferscope completions SHELL` and `inferscope man`: generated at run time from the
//! clap definition, so they always match the binary (no build script).

use std::io::Write;

/// Shell completion script for `shell` on `out`.
pub fn completions(
    shell: clap_complete::Shell,
    cmd: &mut clap::Command,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    clap_complete::generate(shell, cmd, "inferscope", out);
    Ok(())
}

/// The man page of `cmd` (roff, section 1) on `out`, listing its subcommands.
pub fn man(cmd: clap::Command, out: &mut dyn Write) -> anyhow::Result<()> {
    clap_mangen::Man::new(cmd.name("inferscope")).render(out)?;
    Ok(())
}

/// `inferscope.1` and one `inferscope-SUB.1` per visible subcommand (as git does) into `dir`;
/// returns the files written.
pub fn man_pages(
    cmd: clap::Command,
    dir: &std::path::Path,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let cmd = cmd.name("inferscope");
    let mut written = Vec::new();
    let mut write = |name: String, c: clap::Command| -> anyhow::Result<()> {
        let path = dir.join(format!("{name}.1"));
        let mut buf = Vec::new();
        clap_mangen::Man::new(c).render(&mut buf)?;
        std::fs::write(&path, buf).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
        Ok(())
    };
    write("inferscope".into(), cmd.clone())?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("inferscope-{}", sub.get_name());
        let shown = format!("inferscope {}", sub.get_name());
        write(name.clone(), sub.clone().name(name).bin_name(shown))?;
    }
    Ok(written)
}
