//! `--emit docker` / `--emit k8s`: which container image runs the server, and which arguments
//! it gets (issue 26).
//!
//! Each engine's official image starts the server itself (its ENTRYPOINT), so the command after
//! `--` is turned into what that image expects, never passed whole as if its first word were
//! the image. What each image's entrypoint is, as its own Dockerfile says, is its engine's room's
//! answer (`inferscope_plan::engines::EngineRoom::official_image`).
//!
//! "CMD is the image" keeps working: when the first word after `--` is an image reference
//! (`registry/name:tag`) and not a program `run` recognises, it is the image and the rest are
//! its arguments, as before.

use crate::error::LaunchError;
use crate::plan::LaunchPlan;

/// The container the server runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImagePlan {
    /// Image reference.
    pub image: String,
    /// Entrypoint to set instead of the image's own (`--entrypoint`, k8s `command`).
    pub entrypoint: Option<String>,
    /// Arguments after the image (k8s `args`).
    pub args: Vec<String>,
    /// Which image and why, one sentence for a comment.
    pub why: String,
}

/// True when `word` has the shape of an image reference (`[registry/]name[:tag][@digest]`)
/// and is not a path: lowercase repository components, and a `/` or a `:tag`.
pub fn is_image_reference(word: &str) -> bool {
    if word.is_empty() || word.len() > 255 || word.starts_with(['/', '.', '-']) {
        return false;
    }
    let (name, digest) = match word.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (word, None),
    };
    if let Some(d) = digest
        && !d
            .strip_prefix("sha256:")
            .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return false;
    }
    // A tag follows the last ':' when no '/' comes after it (a ':' before a '/' is a port).
    let (repo, tag) = match name.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r, Some(t)),
        _ => (name, None),
    };
    if let Some(t) = tag
        && (t.is_empty()
            || t.len() > 128
            || t.starts_with(['.', '-'])
            || !t
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)))
    {
        return false;
    }
    if !repo.contains('/') && tag.is_none() && digest.is_none() {
        return false;
    }
    let mut parts = repo.split('/').peekable();
    let mut first = true;
    while let Some(p) = parts.next() {
        let registry =
            first && parts.peek().is_some() && (p.contains(['.', ':']) || p == "localhost");
        first = false;
        let ok = !p.is_empty()
            && if registry {
                p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-:".contains(&b))
            } else {
                p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            };
        if !ok {
            return false;
        }
    }
    true
}

/// `--engine-version`: a release as the engine's tags spell it, `v` prefix optional.
fn release(v: &str) -> Result<String, LaunchError> {
    let r = v.strip_prefix('v').unwrap_or(v);
    if r.is_empty()
        || r.len() > 64
        || !r
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
    {
        return Err(LaunchError::Usage(format!(
            "--engine-version {:?}: expected a release such as 0.10.2 (letters, digits, '.', '-', '+')",
            v.chars().take(40).collect::<String>()
        )));
    }
    Ok(r.to_string())
}

/// The engines whose room knows an official image, by their `--engine` spelling.
fn with_image() -> Vec<&'static str> {
    let any = inferscope_plan::engines::ImageShape {
        version: None,
        python: false,
        nvidia: false,
        amd: false,
        rest: Vec::new(),
    };
    inferscope_host::engine::Engine::ALL
        .into_iter()
        .filter(|e| {
            inferscope_plan::engines::room(*e)
                .official_image(&any)
                .is_ok()
        })
        .map(inferscope_host::engine::Engine::cli_id)
        .collect()
}

/// Choose the image for `plan`: `--image` when given, else the engine's official image for
/// `engine_version` (or its newest release, `latest`).
pub fn choose(
    plan: &LaunchPlan,
    image: Option<&str>,
    engine_version: Option<&str>,
) -> Result<ImagePlan, LaunchError> {
    let gpus = Vendors {
        nvidia: plan.gpus.iter().any(|g| g.nvidia),
        amd: plan.gpus.iter().any(|g| !g.nvidia),
    };
    choose_for(plan.engine, &plan.command, gpus, image, engine_version)
}

/// Which GPU vendors the container must run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vendors {
    /// NVIDIA GPUs.
    pub nvidia: bool,
    /// AMD GPUs.
    pub amd: bool,
}

/// [`choose`] for a command and engine without a one-machine plan (`run --emit lws`).
pub fn choose_for(
    engine: Option<inferscope_host::engine::Engine>,
    cmd: &[String],
    gpus: Vendors,
    image: Option<&str>,
    engine_version: Option<&str>,
) -> Result<ImagePlan, LaunchError> {
    let first = cmd.first().map(String::as_str).unwrap_or("");
    let rest: Vec<String> = cmd.iter().skip(1).cloned().collect();
    if engine.is_none() && is_image_reference(first) {
        if let Some(i) = image {
            return Err(LaunchError::Usage(format!(
                "--image {i:?} and an image as the command's first word ({first:?}): give the image once"
            )));
        }
        return Ok(ImagePlan {
            image: first.to_string(),
            entrypoint: None,
            args: rest,
            why: format!(
                "{first} is the command's first word and an image reference: the image's own entrypoint runs with the rest as its arguments"
            ),
        });
    }
    if let Some(i) = image
        && !is_image_reference(i)
        && !(!i.is_empty()
            && !i.starts_with('-')
            && i.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)))
    {
        return Err(LaunchError::Usage(format!(
            "--image {:?}: not an image reference (expected [registry/]name[:tag])",
            i.chars().take(80).collect::<String>()
        )));
    }
    let version = engine_version.map(release).transpose()?;
    let release_said = match (&version, engine_version) {
        (Some(_), Some(given)) => format!("--engine-version {given}"),
        _ => "no --engine-version, so its newest release".to_string(),
    };
    let program = first.rsplit('/').next().unwrap_or(first);
    let shape = inferscope_plan::engines::ImageShape {
        version,
        python: program.starts_with("python"),
        nvidia: gpus.nvidia,
        amd: gpus.amd,
        rest,
    };
    let official = engine.map(|e| inferscope_plan::engines::room(e).official_image(&shape));
    let Some(Ok(inferscope_plan::engines::OfficialImage {
        image: default,
        entrypoint,
        args,
        how,
    })) = official
    else {
        // no engine, or one without an official image: the image must be given
        let Some(i) = image else {
            return Err(LaunchError::Usage(format!(
                "--emit needs --image IMAGE: {:?} is not an engine inferscope knows an official image for ({}); or put the image first after --",
                program.chars().take(80).collect::<String>(),
                with_image().join(", ")
            )));
        };
        return Ok(ImagePlan {
            image: i.to_string(),
            entrypoint: None,
            args: cmd.to_vec(),
            why: format!(
                "{i} from --image; the whole command is its arguments (inferscope does not know this image's entrypoint)"
            ),
        });
    };
    let engine = crate::engine::rules(engine).name;
    Ok(match image {
        Some(i) => ImagePlan {
            image: i.to_string(),
            entrypoint,
            args,
            why: format!(
                "{i} from --image, taken to be a {engine} image like {default}; the command becomes {how}"
            ),
        },
        None => ImagePlan {
            why: format!(
                "{default}: {engine}'s official image ({release_said}; --image overrides); the command becomes {how}"
            ),
            image: default,
            entrypoint,
            args,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_and_paths() {
        for w in [
            "vllm/vllm-openai:v0.10.2",
            "vllm/vllm-openai",
            "ubuntu:24.04",
            "ghcr.io/ggml-org/llama.cpp:server-cuda",
            "localhost:5000/team/server:1",
            "registry.example.com/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert!(is_image_reference(w), "{w}");
        }
        for w in [
            "vllm",
            "/opt/venv/bin/vllm",
            "./serve.sh",
            "python3",
            "Vllm/Openai:x",
            "a b:c",
            "x:",
            "-it",
            "",
            "x@sha256:zz",
        ] {
            assert!(!is_image_reference(w), "{w}");
        }
    }

    #[test]
    fn releases_are_checked() {
        assert_eq!(release("v0.10.2").unwrap(), "0.10.2");
        assert_eq!(release("b6000").unwrap(), "b6000");
        assert!(release("0.10.2; rm -rf /").is_err());
        assert!(release("").is_err());
    }
}
