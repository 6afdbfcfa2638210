#!/usr/bin/env python3
"""The checks behind deploy/check: parses the Dockerfile, the Kubernetes
manifests and the systemd unit, and runs the built binary as each of them
would. Every failure exits non-zero with a message naming the file.

    check.py build-script WORK       writes WORK/context (the build context,
                                     .dockerignore applied) and WORK/build.sh
                                     (the build stage's RUN commands); prints
                                     the binary's path once built
    check.py image BINARY            the final stage, and the binary run with
                                     its ENTRYPOINT and CMD
    check.py kubernetes BINARY       deploy/kubernetes/
    check.py systemd BINARY          deploy/systemd/slidelog-serve.service
"""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
KUBERNETES = ROOT / "deploy" / "kubernetes"
UNIT = ROOT / "deploy" / "systemd" / "slidelog-serve.service"
EXAMPLE_CONFIG = ROOT / "examples" / "envoy" / "ratelimit.yaml"

# Flags of `slidelog serve` that take ADDR:PORT.
ADDRESS_FLAGS = ("--grpc", "--http", "--metrics")
# A build context larger than this has let something big in (a target dir).
CONTEXT_LIMIT = 64 << 20
# Environment a Docker build does not have and that changes cargo's output.
BUILD_ENV_DROPPED = re.compile(
    r"^(CARGO_TARGET_DIR|CARGO_BUILD_TARGET_DIR|CARGO_BUILD_TARGET|RUSTFLAGS"
    r"|CARGO_ENCODED_RUSTFLAGS|CARGO_BUILD_RUSTFLAGS|CARGO_PROFILE_RELEASE_.*)$"
)

# The binary runs as a container or a unit runs it: without this shell's
# environment (it reads envoyproxy/ratelimit's variables, e.g. PORT).
CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}


class CheckError(Exception):
    pass


def fail_unless(condition, message):
    if not condition:
        raise CheckError(message)


# ---------------------------------------------------------------- Dockerfile


def dockerfile_instructions(path):
    """(line number, KEYWORD, rest) for each instruction, continuations joined."""
    instructions = []
    pending, start = None, 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if pending is None and (not stripped or stripped.startswith("#")):
            continue
        if pending is not None and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if pending is None:
            pending, start = "", number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        pending += stripped
        keyword, _, rest = pending.partition(" ")
        instructions.append((start, keyword.upper(), rest.strip()))
        pending = None
    fail_unless(pending is None, f"{path.name}: ends inside a continued line")
    return instructions


def dockerfile_stages(path):
    stages = []
    for number, keyword, rest in dockerfile_instructions(path):
        if keyword == "FROM":
            words = rest.split()
            name = words[2] if len(words) == 3 and words[1].lower() == "as" else None
            stages.append({"image": words[0], "name": name, "line": number, "body": []})
        else:
            fail_unless(stages, f"{path.name}:{number}: {keyword} before FROM")
            stages[-1]["body"].append((number, keyword, rest))
    fail_unless(len(stages) >= 2, f"{path.name}: not multi-stage")
    return stages


def exec_form(path, number, keyword, rest):
    try:
        value = json.loads(rest)
    except json.JSONDecodeError:
        value = None
    fail_unless(
        isinstance(value, list) and value and all(isinstance(v, str) for v in value),
        f"{path.name}:{number}: {keyword} is not in exec form (a JSON list of strings)",
    )
    return value


def build_plan(path):
    """The build stage's workdir, RUN commands (flags removed), its cache
    mounts inside the workdir, and the path the final stage copies from it."""
    stages = dockerfile_stages(path)
    final = stages[-1]
    copies = []
    for number, keyword, rest in final["body"]:
        if keyword == "COPY" and rest.startswith("--from="):
            words = rest.split()
            copies.append((number, words[0][len("--from=") :], words[1:]))
    fail_unless(
        len(copies) == 1 and len(copies[0][2]) == 2,
        f"{path.name}: the final stage must COPY --from=<build stage> one file",
    )
    number, source_stage, (artifact, destination) = copies[0]
    builders = [s for s in stages[:-1] if s["name"] == source_stage]
    fail_unless(builders, f"{path.name}:{number}: no stage named {source_stage}")
    builder = builders[0]

    workdir, copied, runs, cache_targets = None, False, [], []
    for number, keyword, rest in builder["body"]:
        where = f"{path.name}:{number}"
        if keyword == "WORKDIR":
            fail_unless(rest.startswith("/"), f"{where}: WORKDIR not absolute")
            workdir = PurePosixPath(rest)
        elif keyword == "COPY":
            fail_unless(
                workdir is not None and rest.split() in (["."] * 2, [".", str(workdir)]),
                f"{where}: only `COPY . .` into the WORKDIR is emulated (the context copy)",
            )
            copied = True
        elif keyword == "RUN":
            fail_unless(copied, f"{where}: RUN before the context is copied")
            fail_unless(not rest.startswith("["), f"{where}: exec-form RUN is not emulated")
            fail_unless("<<" not in rest, f"{where}: heredoc RUN is not emulated")
            command = rest
            while command.startswith("--"):
                flag, _, command = command.partition(" ")
                command = command.lstrip()
                fail_unless(
                    flag.startswith(("--mount=", "--network=", "--security=")),
                    f"{where}: RUN flag {flag} is not known",
                )
                if flag.startswith("--mount="):
                    options = dict(
                        o.partition("=")[::2] for o in flag[len("--mount=") :].split(",")
                    )
                    target = PurePosixPath(options.get("target") or options.get("dst") or "")
                    if options.get("type") == "cache" and workdir in target.parents:
                        cache_targets.append(target.relative_to(workdir))
            runs.append(command)
        else:
            raise CheckError(f"{where}: {keyword} in the build stage is not emulated")
    fail_unless(runs, f"{path.name}: the build stage has no RUN")

    artifact = PurePosixPath(artifact)
    fail_unless(
        workdir in artifact.parents,
        f"{path.name}: the final stage copies {artifact}, outside the WORKDIR {workdir}",
    )
    relative = artifact.relative_to(workdir)
    for target in cache_targets:
        fail_unless(
            target not in relative.parents,
            f"{path.name}: {artifact} is in a cache mount, which the final stage cannot copy from",
        )
    check_images(path, builder["image"], final["image"])
    return {
        "runs": runs,
        "artifact": str(relative),
        "cache_targets": [str(t) for t in cache_targets],
        "destination": destination,
        "final": final,
    }


def check_images(path, builder, final):
    """The builder's Rust is at least the crate's rust-version, and the final
    image has the builder's Debian release (the binary links its glibc)."""
    match = re.fullmatch(r"rust:([0-9]+)\.([0-9]+)(?:\.[0-9]+)?-(?:slim-)?([a-z]+)", builder)
    fail_unless(match, f"{path.name}: the build stage is not from a rust:X.Y-slim-RELEASE image")
    msrv = re.search(r'^rust-version = "([0-9]+)\.([0-9]+)', (ROOT / "Cargo.toml").read_text(), re.M)
    fail_unless(
        (int(match[1]), int(match[2])) >= (int(msrv[1]), int(msrv[2])),
        f"{path.name}: {builder} is older than rust-version {msrv[1]}.{msrv[2]}",
    )
    releases = {"bookworm": "12", "trixie": "13", "bullseye": "11"}
    fail_unless(
        match[3] in releases
        and (match[3] in final or f"debian{releases[match[3]]}" in final),
        f"{path.name}: the final image {final} is not Debian {match[3]}, the builder's",
    )


def dockerignore_patterns():
    patterns = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").lstrip("/"))
        patterns.append((negated, pattern))
    return patterns


def ignored(relative, patterns):
    """Docker's rule: the last pattern matching the path or a parent decides."""
    parts = relative.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for negated, pattern in patterns:
        regex = re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*")
        regex = regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, c) for c in candidates):
            verdict = not negated
    return verdict


def copy_context(destination):
    """The working tree as `docker build .` sends it, .dockerignore applied."""
    patterns = dockerignore_patterns()
    prune = not any(negated for negated, _ in patterns)
    size = 0
    for directory, subdirectories, files in os.walk(ROOT):
        relative_directory = os.path.relpath(directory, ROOT)
        prefix = "" if relative_directory == "." else relative_directory + "/"
        if prune:
            subdirectories[:] = [d for d in subdirectories if not ignored(prefix + d, patterns)]
        for name in files:
            relative = prefix + name
            if ignored(relative, patterns):
                continue
            source = Path(directory) / name
            size += source.lstat().st_size
            fail_unless(
                size <= CONTEXT_LIMIT,
                f".dockerignore: the build context passes {CONTEXT_LIMIT >> 20} MiB at {relative}",
            )
            target = Path(destination) / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    return size


def build_script(work):
    work = Path(work)
    plan = build_plan(DOCKERFILE)
    context = work / "context"
    size = copy_context(context)
    reuse = os.environ.get("SLIDELOG_DEPLOY_TARGET_DIR")
    lines = [
        "#!/usr/bin/env bash",
        "# The Dockerfile's build stage, as deploy/check runs it (made by deploy/check.py).",
        "set -euo pipefail",
        f"cd {shlex.quote(str(context))}",
    ]
    dropped = sorted(k for k in os.environ if BUILD_ENV_DROPPED.match(k))
    if dropped:
        lines.append("unset " + " ".join(dropped))
    if reuse:
        fail_unless(
            len(plan["cache_targets"]) == 1,
            "SLIDELOG_DEPLOY_TARGET_DIR: the build stage needs one cache mount in its WORKDIR",
        )
        Path(reuse).mkdir(parents=True, exist_ok=True)
        link = context / plan["cache_targets"][0]
        fail_unless(not link.exists(), f"{link} is in the build context")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path(reuse).resolve())
        print(f"{plan['cache_targets'][0]} (a cache mount) is {Path(reuse).resolve()}")
    for command in plan["runs"]:
        lines.append(f"/bin/sh -c {shlex.quote(command)}")
    (work / "build.sh").write_text("\n".join(lines) + "\n")
    print(f"build context: {size / 1e6:.1f} MB in {context}")
    print("\n".join(lines[4:]))
    (work / "binary").write_text(str(context / plan["artifact"]))


def image_command():
    """The final stage's ENTRYPOINT (after the binary) and CMD, checked."""
    plan = build_plan(DOCKERFILE)
    name = DOCKERFILE.name
    entrypoint = command = user = None
    exposed = set()
    for number, keyword, rest in plan["final"]["body"]:
        if keyword == "ENTRYPOINT":
            entrypoint = exec_form(DOCKERFILE, number, keyword, rest)
        elif keyword == "CMD":
            command = exec_form(DOCKERFILE, number, keyword, rest)
        elif keyword == "USER":
            user = rest
        elif keyword == "EXPOSE":
            exposed |= {int(p.split("/")[0]) for p in rest.split()}
    fail_unless(entrypoint and command, f"{name}: the final stage needs ENTRYPOINT and CMD")
    fail_unless(
        user is not None and re.fullmatch(r"[0-9]+(:[0-9]+)?", user) and int(user.split(":")[0]),
        f"{name}: the final stage's USER must be a numeric non-root user "
        f"(Kubernetes verifies runAsNonRoot only for one), not {user!r}",
    )
    destination = plan["destination"]
    binary_in_image = destination + "slidelog" if destination.endswith("/") else destination
    fail_unless(
        entrypoint[0] == binary_in_image and entrypoint[1:] == ["serve"],
        f"{name}: ENTRYPOINT must be [{binary_in_image!r}, 'serve'], not {entrypoint}",
    )
    fail_unless("--config" in command, f"{name}: CMD has no --config")
    ports = set(address_ports(command).values())
    fail_unless(
        ports == exposed,
        f"{name}: EXPOSE {sorted(exposed)} but the CMD listens on {sorted(ports)}",
    )
    return entrypoint[1:], command, f"USER {user}, EXPOSE {sorted(exposed)}"


def address_ports(args):
    ports = {}
    for flag in ADDRESS_FLAGS:
        value = flag_value(args, flag)
        if value is not None:
            ports[flag] = int(value.rsplit(":", 1)[1])
    return ports


def flag_value(args, flag):
    for i, arg in enumerate(args):
        if arg == flag:
            fail_unless(i + 1 < len(args), f"{flag} without a value")
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1 :]
    return None


def check_image(binary):
    entrypoint, command, checked = image_command()
    print(f"{DOCKERFILE.name}: {checked}, ENTRYPOINT and CMD agree")
    args = entrypoint + command
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "config"
        config.mkdir()
        shutil.copy(EXAMPLE_CONFIG, config / EXAMPLE_CONFIG.name)
        smoke(binary, args, {"--config": str(config)}, "the image's command", ["", "ratelimit"])


# ------------------------------------------------------------ running it


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def grpc_health(port, service):
    """grpc.health.v1.Health/Check over h2c with curl: the status number, or
    the grpc-status of a failed call as a string."""
    body = service.encode()
    message = (b"\x0a" + bytes([len(body)]) + body) if body else b""
    frame = b"\x00" + len(message).to_bytes(4, "big") + message
    with tempfile.TemporaryDirectory() as scratch:
        headers = Path(scratch) / "headers"
        result = subprocess.run(
            ["curl", "--silent", "--show-error", "--http2-prior-knowledge", "--max-time", "5",
             "-H", "content-type: application/grpc", "-H", "te: trailers",
             "--data-binary", "@-", "--dump-header", str(headers),
             f"http://127.0.0.1:{port}/grpc.health.v1.Health/Check"],
            input=frame, capture_output=True, check=False,
        )
        fail_unless(result.returncode == 0, f"curl: {result.stderr.decode().strip()}")
        status = re.search(rb"grpc-status: *([0-9]+)", headers.read_bytes())
    fail_unless(status, "a gRPC health answer without grpc-status")
    if status.group(1) != b"0":
        return "grpc-status " + status.group(1).decode()
    # One frame: HealthCheckResponse { status = 1 } is 08 01.
    reply = result.stdout
    fail_unless(len(reply) >= 5, f"a gRPC health answer of {len(reply)} bytes")
    return reply[6] if reply[5:6] == b"\x08" else 0


def http(port, path, data=None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def smoke(binary, args, replaced, label, health_services, state_file=None):
    """Runs `binary` with `args`, its listening addresses moved to free local
    ports and the paths in `replaced` swapped; waits for health, asks each of
    `health_services` over gRPC, checks a limit, reloads (SIGHUP), stops
    (SIGTERM)."""
    args = list(args)
    ports = {}
    for i, arg in enumerate(args):
        if i and args[i - 1] in ADDRESS_FLAGS:
            ports[args[i - 1]] = free_port()
            args[i] = f"127.0.0.1:{ports[args[i - 1]]}"
        elif i and args[i - 1] in replaced:
            args[i] = replaced[args[i - 1]]
    fail_unless("--grpc" in ports and "--http" in ports, f"{label}: no --grpc or --http")
    print(f"{label}: {Path(binary).name} {shlex.join(args)}")
    log = tempfile.TemporaryFile()
    process = subprocess.Popen([binary, *args], stdout=log, stderr=subprocess.STDOUT, env=CLEAN_ENV)
    try:
        deadline = time.monotonic() + 60
        while True:
            fail_unless(process.poll() is None, f"{label}: exited {process.returncode}")
            try:
                if http(ports["--http"], "/healthcheck")[0] == 200:
                    break
            except OSError:
                pass
            fail_unless(time.monotonic() < deadline, f"{label}: not healthy within 60 s")
            time.sleep(0.1)
        for service in health_services:
            status = grpc_health(ports["--grpc"], service)
            fail_unless(
                status == 1,
                f"{label}: gRPC health for {service!r} is {status}, not SERVING (1)",
            )
        print(f"  gRPC health SERVING for {', '.join(repr(s) for s in health_services)}")
        # The example's first rule: 10 a second per remote_address.
        request = json.dumps({"domain": "edge", "descriptors": [
            {"entries": [{"key": "remote_address", "value": "192.0.2.1"}]}]}).encode()
        codes = [http(ports["--http"], "/json", request)[0] for _ in range(11)]
        fail_unless(
            codes[:10] == [200] * 10 and codes[10] == 429,
            f"{label}: POST /json answered {codes}, not 10 x 200 then 429",
        )
        print("  POST /json: 10 admitted, the 11th over the limit")
        if "--metrics" in ports:
            status, text = http(ports["--metrics"], "/metrics")
            fail_unless(
                status == 200 and "slidelog_rls_over_limit_total" in text,
                f"{label}: /metrics answered {status} without slidelog_rls_over_limit_total",
            )
            print("  /metrics counts it")
        process.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        fail_unless(process.poll() is None, f"{label}: exited on SIGHUP")
        fail_unless(
            http(ports["--http"], "/healthcheck")[0] == 200,
            f"{label}: not healthy after SIGHUP",
        )
        rss = Path(f"/proc/{process.pid}/status").read_text()
        rss = re.search(r"VmRSS:\s+(\d+) kB", rss)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        fail_unless(code == 0, f"{label}: exited {code} on SIGTERM")
        print(f"  reloaded on SIGHUP, exited 0 on SIGTERM (resident: {int(rss.group(1)) >> 10} MiB)")
        if state_file:
            fail_unless(Path(state_file).is_file(), f"{label}: no state file at {state_file}")
            print(f"  state saved ({Path(state_file).stat().st_size} bytes)")
    except BaseException:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.seek(0)
        sys.stderr.write(log.read().decode(errors="replace")[-4000:])
        raise


# ------------------------------------------------------------ Kubernetes


def parse_size(text, what):
    """Bytes in a Kubernetes quantity (384Mi) or a --max-memory size (256MiB)."""
    match = re.fullmatch(r"([0-9]+)\s*([KMGT]?)(i?)(B?)", str(text))
    fail_unless(match, f"{what}: {text!r} is not a size")
    number, unit, binary, _ = match.groups()
    base = 1024 if binary else 1000
    return int(number) * base ** " KMGT".index(unit or " ")


def validate_schemas(names):
    """Each manifest against Kubernetes' own schemas, strictly (no unknown
    field), for the oldest and the newest version kubernetes-validate has."""
    import kubernetes_validate
    import yaml

    versions = sorted(set(kubernetes_validate.utils.all_versions()),
                      key=lambda v: tuple(int(x) for x in v.split(".")))
    oldest, newest = versions[0], versions[-1]
    for name in names:
        for document in yaml.safe_load_all((KUBERNETES / name).read_text()):
            for version in (oldest, newest):
                try:
                    kubernetes_validate.validate(document, version, strict=True)
                except kubernetes_validate.ValidationError as error:
                    path = ".".join(str(p) for p in error.path)
                    raise CheckError(f"{name}: Kubernetes {version}: {path}: {error.message}")
    return f"valid in Kubernetes {oldest} and {newest} (strict schemas)"


def check_kubernetes(binary):
    import yaml

    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    listed = kustomization.get("resources", [])
    present = sorted(p.name for p in KUBERNETES.glob("*.yaml") if p.name != "kustomization.yaml")
    fail_unless(
        sorted(listed) == present,
        f"kustomization.yaml lists {sorted(listed)}, the directory has {present}",
    )
    objects = {}
    for name in listed:
        for document in yaml.safe_load_all((KUBERNETES / name).read_text()):
            if document is None:
                continue
            kind = document.get("kind")
            fail_unless(kind not in objects, f"{name}: a second {kind}")
            objects[kind] = (name, document)
    schemas_checked = validate_schemas(listed)
    expected = {"ConfigMap": "v1", "Deployment": "apps/v1", "Service": "v1"}
    fail_unless(
        sorted(objects) == sorted(expected),
        f"deploy/kubernetes: kinds {sorted(objects)}, expected {sorted(expected)}",
    )
    for kind, version in expected.items():
        name, document = objects[kind]
        fail_unless(document.get("apiVersion") == version, f"{name}: {kind} is not {version}")
        fail_unless(document.get("metadata", {}).get("name"), f"{name}: {kind} without a name")

    _, config_map = objects["ConfigMap"]
    where, deployment = objects["Deployment"]
    spec = deployment["spec"]
    template = spec["template"]
    labels = template["metadata"]["labels"]
    selector = spec["selector"]["matchLabels"]
    fail_unless(
        selector.items() <= labels.items(),
        f"{where}: the selector {selector} does not select the pods' labels {labels}",
    )
    pod = template["spec"]
    fail_unless(len(pod["containers"]) == 1, f"{where}: one container expected")
    container = pod["containers"][0]
    fail_unless(
        "command" not in container,
        f"{where}: `command` would replace the image's ENTRYPOINT (slidelog serve)",
    )
    args = [str(a) for a in container.get("args", [])]
    fail_unless(args and args[0] != "serve", f"{where}: args follow `slidelog serve`")

    # Ports: every listening flag has its container port, and no other.
    listening = address_ports(args)
    container_ports = {p["containerPort"]: p.get("name") for p in container["ports"]}
    fail_unless(
        set(listening.values()) == set(container_ports),
        f"{where}: args listen on {sorted(listening.values())}, "
        f"containerPorts are {sorted(container_ports)}",
    )
    health_services = []
    for probe_name in ("readinessProbe", "livenessProbe"):
        probe = container.get(probe_name)
        fail_unless(probe and "grpc" in probe, f"{where}: no gRPC {probe_name}")
        fail_unless(
            probe["grpc"].get("port") == listening.get("--grpc"),
            f"{where}: the {probe_name} asks port {probe['grpc'].get('port')}, "
            f"gRPC is on {listening.get('--grpc')}",
        )
        health_services.append(probe["grpc"].get("service", ""))
    health_services = list(dict.fromkeys(health_services))
    annotations = template["metadata"].get("annotations", {})
    if "prometheus.io/port" in annotations:
        fail_unless(
            int(annotations["prometheus.io/port"]) == listening.get("--metrics"),
            f"{where}: prometheus.io/port is not the --metrics port",
        )

    fail_unless(
        pod.get("enableServiceLinks") is False,
        f"{where}: enableServiceLinks must be false (injected variables such as GRPC_PORT "
        "are read as envoyproxy/ratelimit's)",
    )
    # Security and resources.
    pod_security = pod.get("securityContext", {})
    security = container.get("securityContext", {})
    fail_unless(
        pod_security.get("runAsNonRoot") or security.get("runAsNonRoot"),
        f"{where}: runAsNonRoot is not set",
    )
    user = security.get("runAsUser", pod_security.get("runAsUser"))
    fail_unless(user is None or user > 0, f"{where}: runAsUser {user} is root")
    fail_unless(security.get("readOnlyRootFilesystem") is True, f"{where}: root filesystem writable")
    fail_unless(
        security.get("allowPrivilegeEscalation") is False, f"{where}: privilege escalation allowed"
    )
    limit = container.get("resources", {}).get("limits", {}).get("memory")
    request = container.get("resources", {}).get("requests", {}).get("memory")
    fail_unless(limit and request, f"{where}: memory request and limit expected")
    budget = parse_size(flag_value(args, "--max-memory") or "512MiB", "--max-memory")
    fail_unless(
        budget < parse_size(limit, "limits.memory"),
        f"{where}: --max-memory is not below the memory limit {limit}",
    )

    # The ConfigMap as a directory at --config.
    config_path = flag_value(args, "--config")
    mounts = [m for m in container.get("volumeMounts", []) if m["mountPath"] == config_path]
    fail_unless(mounts, f"{where}: nothing mounted at --config {config_path}")
    volumes = [v for v in pod.get("volumes", []) if v["name"] == mounts[0]["name"]]
    fail_unless(
        volumes and volumes[0].get("configMap", {}).get("name") == config_map["metadata"]["name"],
        f"{where}: {config_path} is not the ConfigMap {config_map['metadata']['name']}",
    )
    data = config_map.get("data", {})
    fail_unless(data, f"{objects['ConfigMap'][0]}: no data")

    where, service = objects["Service"]
    fail_unless(
        service["spec"]["selector"].items() <= labels.items(),
        f"{where}: the selector does not select the pods",
    )
    names = {name: port for port, name in container_ports.items() if name}
    for port in service["spec"]["ports"]:
        target = port.get("targetPort", port["port"])
        fail_unless(
            target in names or target in container_ports,
            f"{where}: targetPort {target} is no container port",
        )
    fail_unless(
        any(names.get(p.get("targetPort"), p.get("targetPort")) == listening["--grpc"]
            for p in service["spec"]["ports"]),
        f"{where}: no port reaches gRPC",
    )
    named = ", ".join(k + " " + d["metadata"]["name"] for k, (_, d) in sorted(objects.items()))
    print(f"deploy/kubernetes: {named}: {schemas_checked}; selectors, ports, probes, mounts, "
          "securityContext and resources agree")

    with tempfile.TemporaryDirectory() as scratch:
        # As the kubelet mounts it: each key a link through ..data.
        config = Path(scratch) / "config"
        version = config / "..2026_01_01_00_00_00.000000001"
        version.mkdir(parents=True)
        (config / "..data").symlink_to(version.name)
        for key, text in data.items():
            (version / key).write_text(text)
            (config / key).symlink_to(f"..data/{key}")
        checked = subprocess.run([binary, "serve", "--check", "--config", str(config)],
                                 capture_output=True, text=True, check=False, env=CLEAN_ENV)
        fail_unless(
            checked.returncode == 0,
            f"{objects['ConfigMap'][0]}: serve --check refused it:\n{checked.stderr}",
        )
        print("  the ConfigMap as the kubelet mounts it: serve --check accepts it")
        fail_unless(
            data.get(EXAMPLE_CONFIG.name) == EXAMPLE_CONFIG.read_text(),
            f"{objects['ConfigMap'][0]}: {EXAMPLE_CONFIG.name} differs from "
            f"{EXAMPLE_CONFIG.relative_to(ROOT)}",
        )
        # The image's ENTRYPOINT, then the Deployment's args.
        entrypoint = image_command()[0]
        smoke(binary, entrypoint + args, {"--config": str(config)}, "the Deployment's args",
              health_services)


# --------------------------------------------------------------- systemd


def unit_sections(path):
    sections, section, pending = {}, None, ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if not pending and (not stripped or stripped[0] in "#;"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        line, pending = pending + stripped, ""
        if line.startswith("["):
            fail_unless(line.endswith("]"), f"{path.name}:{number}: a bad section header")
            section = line[1:-1]
            sections.setdefault(section, {})
            continue
        fail_unless(section, f"{path.name}:{number}: a setting outside a section")
        key, equals, value = line.partition("=")
        fail_unless(equals, f"{path.name}:{number}: not KEY=VALUE")
        sections[section].setdefault(key.strip(), []).append(value.strip())
    return sections


def check_systemd(binary):
    name = UNIT.name
    sections = unit_sections(UNIT)
    fail_unless(
        {"Unit", "Service", "Install"} <= set(sections), f"{name}: [Unit], [Service], [Install]"
    )
    service = {k: v[-1] for k, v in sections["Service"].items()}
    required = {"DynamicUser": "yes", "ProtectSystem": "strict", "Restart": "on-failure"}
    for key, value in required.items():
        fail_unless(service.get(key) == value, f"{name}: {key}={value} expected")
    fail_unless(
        re.fullmatch(r"\S*kill -(HUP|SIGHUP|s HUP) \$MAINPID", service.get("ExecReload", "")),
        f"{name}: ExecReload must send SIGHUP to $MAINPID",
    )
    command = shlex.split(service["ExecStart"])
    fail_unless(
        command[0].startswith("/") and command[1] == "serve",
        f"{name}: ExecStart must be /…/slidelog serve …",
    )
    state_file = flag_value(command, "--state-file")
    state_directory = service.get("StateDirectory")
    fail_unless(state_file and state_directory, f"{name}: --state-file and StateDirectory expected")
    fail_unless(
        Path(state_file).parent == Path("/var/lib") / state_directory,
        f"{name}: --state-file {state_file} is not in StateDirectory /var/lib/{state_directory}",
    )
    config_directory = service.get("ConfigurationDirectory")
    if config_directory:
        fail_unless(
            flag_value(command, "--config") == f"/etc/{config_directory}",
            f"{name}: --config is not ConfigurationDirectory /etc/{config_directory}",
        )
    print(f"{name}: [Unit] [Service] [Install]; {', '.join(f'{k}={v}' for k, v in required.items())}, "
          f"ExecReload SIGHUP, --state-file in StateDirectory")

    with tempfile.TemporaryDirectory() as scratch:
        if shutil.which("systemd-analyze"):
            copy = Path(scratch) / name
            copy.write_text(UNIT.read_text().replace(command[0], str(Path(binary).resolve())))
            verify = subprocess.run(["systemd-analyze", "verify", str(copy)],
                                    capture_output=True, text=True, check=False)
            complaints = (verify.stdout + verify.stderr).strip()
            fail_unless(
                verify.returncode == 0 and not complaints,
                f"{name}: systemd-analyze verify:\n{complaints}",
            )
            print("  systemd-analyze verify: no complaint")
            # Its threshold is on a scale of 100; it prints tenths of that.
            security = subprocess.run(
                ["systemd-analyze", "security", "--offline=true", "--threshold=20", str(copy)],
                capture_output=True, text=True, check=False,
            )
            score = (security.stdout.strip().splitlines() or [security.stderr.strip()])[-1]
            fail_unless(
                security.returncode == 0,
                f"{name}: systemd-analyze security, over 2.0: {score}",
            )
            print(f"  systemd-analyze security: {score.lstrip('→ ')}")
        else:
            print("  systemd-analyze is not installed: sections parsed only")
        config = Path(scratch) / "etc"
        config.mkdir()
        shutil.copy(EXAMPLE_CONFIG, config / EXAMPLE_CONFIG.name)
        state = str(Path(scratch) / "state")
        smoke(binary, command[1:], {"--config": str(config), "--state-file": state},
              "the unit's ExecStart", ["", "ratelimit"], state_file=state)


def main():
    what, argument = sys.argv[1], sys.argv[2]
    try:
        {
            "build-script": build_script,
            "image": check_image,
            "kubernetes": check_kubernetes,
            "systemd": check_systemd,
        }[what](argument)
    except CheckError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
