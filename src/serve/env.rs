//! envoyproxy/ratelimit's environment variables, read as the flags they
//! stand for, so that a deployment written for it keeps working: each
//! variable that is set adds its flag to `slidelog serve`'s command line,
//! unless the command line gives that flag itself (flags win).
//!
//! When the configuration comes from `RUNTIME_ROOT` (no `--config`), the
//! service also takes upstream's defaults for what its manifests leave
//! unset: gRPC on `0.0.0.0:8081` and HTTP (`/healthcheck`, `/json`) on
//! `0.0.0.0:8080`.

use std::ffi::OsString;

/// What a variable becomes on the command line.
enum Becomes {
    /// `--flag VALUE`.
    Value(&'static str),
    /// `--flag` when the variable reads true (Go's `strconv.ParseBool`).
    Switch(&'static str),
}

/// The variables that map one to one onto a flag.
const ONE_TO_ONE: &[(&str, Becomes)] = &[
    ("GRPC_UDS", Becomes::Value("--grpc-uds")),
    (
        "GRPC_MAX_CONNECTION_AGE",
        Becomes::Value("--max-connection-age"),
    ),
    ("GRPC_SERVER_TLS_CERT", Becomes::Value("--grpc-tls-cert")),
    ("GRPC_SERVER_TLS_KEY", Becomes::Value("--grpc-tls-key")),
    ("GRPC_CLIENT_TLS_CACERT", Becomes::Value("--grpc-client-ca")),
    ("GRPC_CLIENT_TLS_SAN", Becomes::Value("--grpc-client-san")),
    ("MERGE_DOMAIN_CONFIG", Becomes::Switch("--merge-domains")),
    ("SHADOW_MODE", Becomes::Switch("--shadow-mode")),
    ("QUOTA_MODE", Becomes::Switch("--quota-mode")),
    (
        "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
        Becomes::Switch("--all-or-nothing"),
    ),
    (
        "LIMIT_RESPONSE_HEADERS_ENABLED",
        Becomes::Switch("--response-headers"),
    ),
    ("LIMIT_LIMIT_HEADER", Becomes::Value("--limit-header")),
    (
        "LIMIT_REMAINING_HEADER",
        Becomes::Value("--remaining-header"),
    ),
    ("LIMIT_RESET_HEADER", Becomes::Value("--reset-header")),
    (
        "RESPONSE_DYNAMIC_METADATA",
        Becomes::Switch("--response-dynamic-metadata"),
    ),
    ("NEAR_LIMIT_RATIO", Becomes::Value("--near-limit-ratio")),
    ("CACHE_KEY_PREFIX", Becomes::Value("--redis-prefix")),
    ("REDIS_TIMEOUT", Becomes::Value("--redis-timeout")),
    (
        "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
        Becomes::Switch("--redis-health-check-active-connection"),
    ),
    ("REDIS_TLS_CACERT", Becomes::Value("--redis-ca")),
    (
        "REDIS_TLS_CLIENT_CERT",
        Becomes::Value("--redis-client-cert"),
    ),
    ("REDIS_TLS_CLIENT_KEY", Becomes::Value("--redis-client-key")),
    (
        "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
        Becomes::Switch("--redis-tls-skip-hostname-verification"),
    ),
];

/// Upstream's `REDIS_URL` default (with `REDIS_SOCKET_TYPE`'s, `unix`).
const REDIS_URL: &str = "/var/run/nutcracker/ratelimit.sock";

/// Upstream's `RUNTIME_ROOT` default.
const RUNTIME_ROOT: &str = "/srv/runtime_data/current";

/// `args` (the whole command line, the program first) with the flags
/// upstream's variables stand for added, `var` reading the environment;
/// unchanged unless the command is `serve`. An error names a variable
/// whose value cannot be used, or that asks for what the service does
/// not do.
pub fn with_upstream_env(
    mut args: Vec<OsString>,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Vec<OsString>, String> {
    if args.get(1).is_none_or(|a| a != "serve") {
        return Ok(args);
    }
    // Set and not empty, as envconfig reads them.
    let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    let given = |flag: &str| {
        args.iter().any(|a| {
            a.to_str()
                .is_some_and(|a| a == flag || a.starts_with(&format!("{flag}=")))
        })
    };
    // `--check` reads the configuration and serves nothing: of upstream's
    // variables only those that find the configuration apply (every other
    // flag conflicts with it).
    let checking = given("--check");
    let mut added: Vec<String> = Vec::new();
    let mut add = |flag: &str, value: Option<String>| {
        if !given(flag) && (!checking || flag == "--config") {
            added.push(flag.to_string());
            added.extend(value);
        }
    };
    for (name, becomes) in ONE_TO_ONE {
        let Some(value) = var(name) else { continue };
        match becomes {
            Becomes::Value(flag) => add(flag, Some(value)),
            Becomes::Switch(flag) => {
                if parse_bool(name, &value)? {
                    add(flag, None);
                }
            }
        }
    }
    if var("GRPC_SERVER_USE_TLS").is_some_and(|v| parse_bool("GRPC_SERVER_USE_TLS", &v) == Ok(true))
        && var("GRPC_SERVER_TLS_CERT").is_none()
        && !given("--grpc-tls-cert")
    {
        return Err("GRPC_SERVER_USE_TLS is true but GRPC_SERVER_TLS_CERT is not set".into());
    }
    // The configuration: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY,
    // as upstream's runtime loader finds it.
    let from_runtime = !given("--config")
        && (var("RUNTIME_ROOT").is_some() || var("RUNTIME_SUBDIRECTORY").is_some());
    if from_runtime {
        let mut path = std::path::PathBuf::from(var("RUNTIME_ROOT").unwrap_or(RUNTIME_ROOT.into()));
        if let Some(sub) = var("RUNTIME_SUBDIRECTORY") {
            path.push(sub);
        }
        path.push(var("RUNTIME_APPDIRECTORY").unwrap_or("config".into()));
        add("--config", Some(path.display().to_string()));
    }
    // gRPC and HTTP: upstream's HOST/PORT pairs, with its defaults when the
    // deployment is upstream's own (configured from RUNTIME_ROOT).
    let grpc_port = var("GRPC_PORT").or_else(|| var("GRPC_HOST").map(|_| "8081".into()));
    if !given("--grpc-uds") && var("GRPC_UDS").is_none() {
        let port = grpc_port.or_else(|| from_runtime.then(|| "8081".into()));
        if let Some(port) = port {
            let host = var("GRPC_HOST").unwrap_or("0.0.0.0".into());
            add("--grpc", Some(host_port(&host, &port)));
        }
    }
    let http_port = var("PORT").or_else(|| var("HOST").map(|_| "8080".into()));
    if let Some(port) = http_port.or_else(|| from_runtime.then(|| "8080".into())) {
        let host = var("HOST").unwrap_or("0.0.0.0".into());
        add("--http", Some(host_port(&host, &port)));
    }
    if let Some(on) = var("USE_PROMETHEUS")
        && parse_bool("USE_PROMETHEUS", &on)?
    {
        let addr = var("PROMETHEUS_ADDR").unwrap_or(":9090".into());
        let addr = match addr.strip_prefix(':') {
            Some(port) => format!("0.0.0.0:{port}"),
            None => addr,
        };
        if var("PROMETHEUS_PATH").is_some_and(|p| p != "/metrics") {
            return Err("PROMETHEUS_PATH: metrics are served at /metrics only".into());
        }
        add("--metrics", Some(addr));
    }
    if let Some(backend) = var("BACKEND_TYPE")
        && !backend.eq_ignore_ascii_case("redis")
    {
        return Err(format!(
            "BACKEND_TYPE={backend}: slidelog serve keeps its logs in process or in Redis (unset it, or set REDIS_URL)"
        ));
    }
    if let Some(redis) = redis_flag(&var)? {
        let (flag, value) = redis;
        if !given("--redis") && !given("--redis-cluster") {
            add(flag, Some(value));
        }
    }
    for unsupported in ["REDIS_PERSECOND", "CONFIG_TYPE"] {
        if let Some(value) = var(unsupported) {
            let off = match unsupported {
                "REDIS_PERSECOND" => !parse_bool(unsupported, &value)?,
                _ => value.eq_ignore_ascii_case("FILE"),
            };
            if !off {
                return Err(format!(
                    "{unsupported}={value} is not supported by slidelog serve (README, \"Envoy's rate-limit service\")"
                ));
            }
        }
    }
    args.extend(added.into_iter().map(OsString::from));
    Ok(args)
}

/// `--redis URL` or `--redis-cluster URL,..` from `REDIS_URL`,
/// `REDIS_TYPE`, `REDIS_SOCKET_TYPE`, `REDIS_TLS` and `REDIS_AUTH`.
fn redis_flag(
    var: &impl Fn(&str) -> Option<String>,
) -> Result<Option<(&'static str, String)>, String> {
    // Upstream's default address, where a deployment names a Redis
    // without one (its nutcracker sidecar's socket).
    let asked = [
        "BACKEND_TYPE",
        "REDIS_SOCKET_TYPE",
        "REDIS_TYPE",
        "REDIS_AUTH",
        "REDIS_TLS",
    ]
    .iter()
    .any(|name| var(name).is_some());
    let Some(url) = var("REDIS_URL").or_else(|| asked.then(|| REDIS_URL.to_string())) else {
        return Ok(None);
    };
    let tls = match var("REDIS_TLS") {
        Some(v) => parse_bool("REDIS_TLS", &v)?,
        None => false,
    };
    let auth = var("REDIS_AUTH").map(|auth| {
        // `password` or `user:password`, each part escaped for the URL.
        let escape = |s: &str| {
            percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
        };
        match auth.split_once(':') {
            Some((user, password)) => format!("{}:{}@", escape(user), escape(password)),
            None => format!(":{}@", escape(&auth)),
        }
    });
    let auth = auth.unwrap_or_default();
    let socket = var("REDIS_SOCKET_TYPE").unwrap_or("unix".into());
    let one = |addr: &str| -> Result<String, String> {
        if addr.contains("://") {
            return Ok(addr.to_string());
        }
        match socket.to_ascii_lowercase().as_str() {
            "tcp" => Ok(format!(
                "{}://{auth}{addr}/",
                if tls { "rediss" } else { "redis" }
            )),
            "unix" if tls => Err("REDIS_TLS over a unix socket (REDIS_SOCKET_TYPE=unix)".into()),
            "unix" => Ok(format!("unix://{addr}")),
            other => Err(format!("REDIS_SOCKET_TYPE={other}: tcp or unix")),
        }
    };
    let kind = var("REDIS_TYPE").unwrap_or("SINGLE".into());
    Ok(Some(match kind.to_ascii_uppercase().as_str() {
        "SINGLE" => ("--redis", one(&url)?),
        "CLUSTER" => {
            let nodes: Result<Vec<String>, String> =
                url.split(',').map(|a| one(a.trim())).collect();
            ("--redis-cluster", nodes?.join(","))
        }
        "SENTINEL" => {
            return Err(
                "REDIS_TYPE=SENTINEL is not supported: give the master's address (REDIS_TYPE=SINGLE) or a Redis Cluster".into(),
            );
        }
        other => return Err(format!("REDIS_TYPE={other}: SINGLE or CLUSTER")),
    }))
}

/// `host:port`, an IPv6 host in brackets.
fn host_port(host: &str, port: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A boolean as Go's `strconv.ParseBool` (and so envconfig) reads it.
fn parse_bool(name: &str, value: &str) -> Result<bool, String> {
    match value.trim() {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        other => Err(format!("{name}={other}: not a boolean (true or false)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn run(cmd: &[&str], env: &[(&str, &str)]) -> Result<Vec<String>, String> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let args = cmd.iter().map(OsString::from).collect();
        with_upstream_env(args, |name| env.get(name).cloned())
            .map(|a| a.into_iter().map(|a| a.into_string().unwrap()).collect())
    }

    #[test]
    fn an_upstream_manifest_becomes_flags() {
        // The environment of upstream's own Kubernetes example.
        let args = run(
            &["slidelog", "serve"],
            &[
                ("LOG_LEVEL", "debug"),
                ("REDIS_SOCKET_TYPE", "tcp"),
                ("REDIS_URL", "redis:6379"),
                ("USE_STATSD", "false"),
                ("RUNTIME_ROOT", "/data"),
                ("RUNTIME_SUBDIRECTORY", "ratelimit"),
                ("RUNTIME_WATCH_ROOT", "false"),
                ("RUNTIME_IGNOREDOTFILES", "true"),
                ("USE_PROMETHEUS", "true"),
                ("SHADOW_MODE", "True"),
                ("NEAR_LIMIT_RATIO", "0.9"),
            ],
        )
        .unwrap();
        let line = args.join(" ");
        for part in [
            "--config /data/ratelimit/config",
            "--grpc 0.0.0.0:8081",
            "--http 0.0.0.0:8080",
            "--metrics 0.0.0.0:9090",
            "--redis redis://redis:6379/",
            "--shadow-mode",
            "--near-limit-ratio 0.9",
        ] {
            assert!(line.contains(part), "no `{part}` in `{line}`");
        }
    }

    /// `serve --check` in an upstream deployment's environment: the
    /// configuration found as upstream finds it, and nothing that serves.
    #[test]
    fn a_check_takes_only_the_configuration() {
        let args = run(
            &["slidelog", "serve", "--check"],
            &[
                ("RUNTIME_ROOT", "/data"),
                ("RUNTIME_SUBDIRECTORY", "ratelimit"),
                ("USE_PROMETHEUS", "true"),
                ("SHADOW_MODE", "true"),
                ("REDIS_URL", "redis:6379"),
            ],
        )
        .unwrap();
        assert_eq!(
            args.join(" "),
            "slidelog serve --check --config /data/ratelimit/config"
        );
    }

    #[test]
    fn flags_win_and_other_commands_are_left_alone() {
        let env = [("GRPC_PORT", "9000"), ("SHADOW_MODE", "true")];
        let args = run(
            &["slidelog", "serve", "--grpc=127.0.0.1:1", "--config", "c"],
            &env,
        )
        .unwrap();
        assert_eq!(args.iter().filter(|a| a.starts_with("--grpc")).count(), 1);
        assert!(args.contains(&"--shadow-mode".to_string()));
        let args = run(&["slidelog", "demo"], &env).unwrap();
        assert_eq!(args, ["slidelog", "demo"]);
        // No RUNTIME_ROOT: no default ports are added.
        let args = run(&["slidelog", "serve", "--config", "c"], &[]).unwrap();
        assert_eq!(args, ["slidelog", "serve", "--config", "c"]);
    }

    #[test]
    fn redis_variants() {
        let flags =
            |env: &[(&str, &str)]| run(&["slidelog", "serve"], env).map(|a| a[2..].join(" "));
        assert_eq!(
            flags(&[
                ("REDIS_URL", "r:6379"),
                ("REDIS_SOCKET_TYPE", "tcp"),
                ("REDIS_TLS", "true"),
                ("REDIS_AUTH", "u:p@ss")
            ]),
            Ok("--redis rediss://u:p%40ss@r:6379/".into())
        );
        assert_eq!(
            flags(&[("REDIS_URL", "/run/redis.sock")]),
            Ok("--redis unix:///run/redis.sock".into())
        );
        assert_eq!(
            flags(&[
                ("REDIS_URL", "a:1, b:2"),
                ("REDIS_SOCKET_TYPE", "tcp"),
                ("REDIS_TYPE", "cluster")
            ]),
            Ok("--redis-cluster redis://a:1/,redis://b:2/".into())
        );
        assert!(
            flags(&[("REDIS_URL", "a:1"), ("REDIS_TYPE", "sentinel")])
                .unwrap_err()
                .contains("SENTINEL")
        );
        assert!(
            flags(&[("BACKEND_TYPE", "memcache")])
                .unwrap_err()
                .contains("BACKEND_TYPE")
        );
        assert!(
            flags(&[("SHADOW_MODE", "maybe")])
                .unwrap_err()
                .contains("not a boolean")
        );
        assert!(
            flags(&[("REDIS_PERSECOND", "true")])
                .unwrap_err()
                .contains("not supported")
        );
        assert_eq!(flags(&[("REDIS_PERSECOND", "false")]), Ok(String::new()));
        // A Redis asked for without an address: upstream's default socket.
        assert_eq!(
            flags(&[("BACKEND_TYPE", "redis")]),
            Ok("--redis unix:///var/run/nutcracker/ratelimit.sock".into())
        );
    }
}
