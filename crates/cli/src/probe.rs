//! `vantage probe`: a regional prober. Enrolls once with a token, then loops: fetch targets
//! and settings, probe, report (§2, §3.2). Also the settings every agent-channel client shares
//! (`vantage agent` flattens them): from a TOML file, `VANTAGE_*` variables and flags, in
//! rising precedence.
//!
//! Exit status: 0 after SIGINT/SIGTERM, 2 for a bad setting, 1 when the channel cannot be
//! joined for a reason that will not pass by itself (CA fingerprint mismatch, refused token,
//! unusable state directory). An unreachable server is waited for.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitCode;

use vantage_agent::{ChannelOptions, Fingerprint, ProberOptions, Url};
use vantage_probe::SourceAddresses;
use vantage_server::LogFormat;

/// Settings of `vantage probe` and `vantage agent` as a TOML file holds them (every key
/// optional; the environment and flags override them).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileSettings {
    server: Option<String>,
    token: Option<String>,
    ca_sha256: Option<String>,
    hostname: Option<String>,
    state_dir: Option<PathBuf>,
    concurrency: Option<usize>,
    source_addresses: Option<Vec<IpAddr>>,
    log_format: Option<String>,
    log_level: Option<String>,
    // `vantage agent` only.
    pub(crate) metrics_file: Option<PathBuf>,
    pub(crate) addresses: Option<Vec<IpAddr>>,
    pub(crate) links: Option<Vec<String>>,
}

impl FileSettings {
    fn read(path: &Path) -> Result<Self, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// How to reach and join the agent channel.
#[derive(Debug, clap::Args)]
pub(crate) struct ChannelArgs {
    /// TOML settings file (keys as the flags, with underscores: server, token, ca_sha256,
    /// state_dir…).
    #[arg(long, env = "VANTAGE_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The agent channel URL, like https://vantage.example.net:8443. Needed for the first
    /// start; later starts use the saved one unless given.
    #[arg(long, env = "VANTAGE_SERVER")]
    server: Option<String>,
    /// Single-use enrollment token. Needed for the first start; ignored once enrolled.
    #[arg(long, env = "VANTAGE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// SHA-256 of the channel CA certificate (hex, colons allowed), shown with the token.
    /// Needed for the first start: the token is sent only to a server with that CA.
    #[arg(long = "ca-sha256", env = "VANTAGE_CA_SHA256", value_name = "HEX")]
    ca_sha256: Option<String>,
    /// Host name shown in lists [default: this host's name].
    #[arg(long, env = "VANTAGE_HOSTNAME")]
    hostname: Option<String>,
    /// Targets probed at once at most; the open-file limit may lower it [default: 10000].
    #[arg(long, env = "VANTAGE_CONCURRENCY")]
    concurrency: Option<String>,
    /// Local address probe connections leave from, at most one per family (repeat, or
    /// comma-separated): for multi-homed hosts [default: the kernel picks].
    #[arg(
        long = "source-address",
        value_name = "IP",
        env = "VANTAGE_SOURCE_ADDRESSES",
        value_delimiter = ','
    )]
    source_addresses: Vec<IpAddr>,
    /// Log format: text or json [default: text].
    #[arg(long, env = "VANTAGE_LOG_FORMAT")]
    log_format: Option<String>,
    /// Log filter, like `info` or `vantage_agent=debug,info` [default: info].
    #[arg(long, env = "VANTAGE_LOG_LEVEL")]
    log_level: Option<String>,
}

/// The shared settings once file, environment and flags are merged and checked.
#[derive(Debug)]
pub(crate) struct Resolved {
    pub(crate) channel: ChannelOptions,
    pub(crate) concurrency: usize,
    pub(crate) source: SourceAddresses,
    pub(crate) file: FileSettings,
    log_format: LogFormat,
    log_level: String,
}

impl Resolved {
    pub(crate) fn init_logs(&self) {
        crate::serve::init_logs(self.log_format, &self.log_level);
    }
}

impl ChannelArgs {
    /// Merges the file (if any) under the environment and flags; `state_dir` is the flag's
    /// value, `default_state_dir` the subcommand's default. Errors name the setting.
    pub(crate) fn resolve(
        &self,
        state_dir: Option<PathBuf>,
        default_state_dir: &str,
    ) -> Result<Resolved, String> {
        let file = match &self.config {
            Some(path) => FileSettings::read(path)?,
            None => FileSettings::default(),
        };
        let pick = |flag: &Option<String>, file: &Option<String>| flag.clone().or_else(|| file.clone());
        let server = pick(&self.server, &file.server)
            .map(|s| Url::parse(&s).map_err(|e| format!("server: {s:?}: {e}")))
            .transpose()?;
        let ca_sha256 = pick(&self.ca_sha256, &file.ca_sha256)
            .map(|s| s.parse::<Fingerprint>().map_err(|e| format!("ca-sha256: {e}")))
            .transpose()?;
        let concurrency = match (&self.concurrency, file.concurrency) {
            (Some(s), _) => parse_concurrency(s)?,
            (None, Some(n)) => parse_concurrency(&n.to_string())?,
            (None, None) => vantage_agent::DEFAULT_CONCURRENCY,
        };
        let source = if self.source_addresses.is_empty() {
            file.source_addresses.as_deref().unwrap_or_default()
        } else {
            &self.source_addresses
        };
        let source = SourceAddresses::from_list(source).map_err(|e| format!("source-address: {e}"))?;
        let log_format = match pick(&self.log_format, &file.log_format).as_deref() {
            None | Some("text") => LogFormat::Text,
            Some("json") => LogFormat::Json,
            Some(other) => return Err(format!("log-format: {other:?}: text or json")),
        };
        let channel = ChannelOptions {
            server,
            token: pick(&self.token, &file.token),
            ca_sha256,
            state_dir: state_dir
                .or_else(|| file.state_dir.clone())
                .unwrap_or_else(|| PathBuf::from(default_state_dir)),
            hostname: pick(&self.hostname, &file.hostname),
        };
        let log_level = pick(&self.log_level, &file.log_level).unwrap_or_else(|| "info".to_owned());
        Ok(Resolved { channel, concurrency, source, file, log_format, log_level })
    }
}

/// Run a regional prober.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    channel: ChannelArgs,
    /// State directory: key (0600), certificate, CA, identity [default: /var/lib/vantage-probe].
    #[arg(long, env = "VANTAGE_STATE_DIR")]
    state_dir: Option<PathBuf>,
}

fn parse_concurrency(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(n),
        _ => Err(format!("concurrency: {s:?}: a number of targets from 1 to 1000000")),
    }
}

/// A bad setting: printed as it is, exit status 2.
pub(crate) fn bad_setting(msg: &str) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

/// Runs a library entry point until SIGINT/SIGTERM and maps its outcome to an exit status.
pub(crate) fn run_until_stopped<F>(
    run: impl FnOnce(Pin<Box<dyn Future<Output = ()> + Send>>) -> F,
) -> anyhow::Result<ExitCode>
where
    F: Future<Output = vantage_agent::Result<()>>,
{
    let rt = tokio::runtime::Runtime::new()?;
    Ok(rt.block_on(async move {
        match run(Box::pin(crate::serve::stop_signal())).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e @ vantage_agent::Error::Config { .. }) => {
                tracing::error!("{e}");
                ExitCode::from(2)
            }
            Err(e) => {
                tracing::error!("{e}");
                ExitCode::FAILURE
            }
        }
    }))
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let resolved = match args.channel.resolve(args.state_dir, "/var/lib/vantage-probe") {
        Ok(r) => r,
        Err(msg) => return Ok(bad_setting(&msg)),
    };
    let f = &resolved.file;
    if f.metrics_file.is_some() || f.addresses.is_some() || f.links.is_some() {
        return Ok(bad_setting(
            "metrics_file, addresses and links are settings of `vantage agent`, not of `vantage probe`",
        ));
    }
    resolved.init_logs();
    let opts = ProberOptions {
        concurrency: resolved.concurrency,
        source: resolved.source,
        ..ProberOptions::new(resolved.channel)
    };
    run_until_stopped(move |stop| vantage_agent::run_prober(opts, stop))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        channel: ChannelArgs,
    }

    const PIN: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    #[test]
    fn flags_override_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("probe.toml");
        let toml = format!(
            "server = \"https://a.example:8443\"\ntoken = \"vtp_file\"\nca_sha256 = \"{PIN}\"\n\
             state_dir = \"/srv/probe\"\nconcurrency = 50\nlog_format = \"json\"\n"
        );
        std::fs::write(&file, toml).unwrap();
        let config = file.to_str().unwrap();
        let t = T::try_parse_from(["t", "--config", config, "--server", "https://b.example:8443"]).unwrap();
        let r = t.channel.resolve(None, "/var/lib/x").unwrap();
        assert_eq!(r.channel.server.unwrap().as_str(), "https://b.example:8443/");
        assert_eq!(r.channel.token.as_deref(), Some("vtp_file"));
        assert_eq!(r.channel.ca_sha256.unwrap().to_string(), PIN);
        assert_eq!(r.channel.state_dir, PathBuf::from("/srv/probe"));
        assert_eq!((r.concurrency, r.log_format), (50, LogFormat::Json));
        assert!(r.source.is_empty());
        let r = t.channel.resolve(Some("/flag".into()), "/var/lib/x").unwrap();
        assert_eq!(r.channel.state_dir, PathBuf::from("/flag"));

        let t = T::try_parse_from(["t"]).unwrap();
        let r = t.channel.resolve(None, "/var/lib/x").unwrap();
        assert_eq!(
            (r.channel.state_dir, r.concurrency),
            (PathBuf::from("/var/lib/x"), vantage_agent::DEFAULT_CONCURRENCY)
        );
    }

    #[test]
    fn source_addresses_from_the_file_or_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("probe.toml");
        std::fs::write(&file, "source_addresses = [\"192.0.2.7\", \"2001:db8::7\"]\n").unwrap();
        let config = file.to_str().unwrap();
        let r = T::try_parse_from(["t", "--config", config]).unwrap().channel.resolve(None, "/x").unwrap();
        assert_eq!(r.source.to_string(), "192.0.2.7,2001:db8::7");
        let t = T::try_parse_from(["t", "--config", config, "--source-address", "198.51.100.1"]).unwrap();
        let r = t.channel.resolve(None, "/x").unwrap();
        assert_eq!(r.source.to_string(), "198.51.100.1", "the flag replaces the file's list");
        let t = T::try_parse_from(["t", "--source-address", "198.51.100.1,::1"]).unwrap();
        assert_eq!(t.channel.resolve(None, "/x").unwrap().source.to_string(), "198.51.100.1,::1");
    }

    #[test]
    fn bad_settings_name_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("probe.toml");
        std::fs::write(&file, "servr = \"x\"\n").unwrap();
        let t = T::try_parse_from(["t", "--config", file.to_str().unwrap()]).unwrap();
        assert!(t.channel.resolve(None, "/x").unwrap_err().contains("servr"));
        for (flag, value, name) in [
            ("--ca-sha256", "abc", "ca-sha256"),
            ("--concurrency", "0", "concurrency"),
            ("--log-format", "xml", "log-format"),
            ("--source-address", "10.0.0.1,10.0.0.2", "source-address"),
        ] {
            let t = T::try_parse_from(["t", flag, value]).unwrap();
            assert!(t.channel.resolve(None, "/x").unwrap_err().starts_with(name), "{flag}");
        }
    }
}
