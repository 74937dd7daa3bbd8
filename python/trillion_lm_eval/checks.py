"""Checks made before any job starts, so that a wrong argument fails in a
second with a message naming it instead of after mpirun has launched."""
import concurrent.futures
import ipaddress
import os
import shutil
import socket
import subprocess


class SetupError(ValueError):
    """A model_arg that cannot work (the message names it)."""


def check_binary(binary):
    path = binary if os.sep in binary else shutil.which(binary)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise SetupError(f"binary={binary}: no executable trillion there "
                         f"(give binary=PATH_TO/build/trillion)")
    return os.path.abspath(path)


def check_model_dir(model, converted=True):
    """A converted trillion model (config.json, manifest.json, the tokenizer)
    or, when converted=False (the reference), also a Hugging Face checkpoint."""
    if not model:
        raise SetupError("model_args needs model=MODEL_DIR")
    if not os.path.isdir(model):
        raise SetupError(f"model={model}: no such directory")
    if not os.path.isfile(os.path.join(model, "config.json")):
        raise SetupError(f"model={model}: no config.json: not a model directory")
    has_manifest = os.path.isfile(os.path.join(model, "manifest.json"))
    has_hf = os.path.isfile(os.path.join(model, "model.safetensors.index.json"))
    if converted and not has_manifest:
        hint = " (a Hugging Face checkpoint: convert it with `trillion convert`)" if has_hf else ""
        raise SetupError(f"model={model}: no manifest.json: not a converted trillion model{hint}")
    if not converted and not (has_manifest or has_hf):
        raise SetupError(f"model={model}: neither manifest.json (trillion) nor model.safetensors.index.json "
                         f"(Hugging Face): not a model directory")
    if not any(os.path.isfile(os.path.join(model, f)) for f in ("tokenizer.json", "tiktoken.model")):
        raise SetupError(f"model={model}: no tokenizer.json or tiktoken.model: the harness sends text, "
                         f"which needs the model's tokenizer")
    return os.path.abspath(model)


def hostfile_hosts(hostfile):
    """[(line number, host)] of an Open MPI hostfile (first word of each line,
    comments and blank lines skipped)."""
    if not os.path.isfile(hostfile):
        raise SetupError(f"hostfile={hostfile}: no such file")
    hosts = []
    with open(hostfile) as f:
        for n, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if words:
                hosts.append((n, words[0]))
    if not hosts:
        raise SetupError(f"hostfile={hostfile}: names no host")
    return hosts


def _is_local(host):
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _reach(host, timeout):
    """Why host cannot be used by mpirun, or None. mpirun starts its daemons
    over ssh without a terminal, so the test is exactly that: the name
    resolves, and `ssh -o BatchMode=yes` runs a command there without a
    password prompt within the timeout."""
    try:
        socket.getaddrinfo(host, 22)
    except socket.gaierror as e:
        return f"does not resolve ({e.strerror})"
    try:
        p = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}", host, "true"],
                           capture_output=True, text=True, timeout=timeout + 5)
    except FileNotFoundError:
        return "cannot be checked: no ssh client (mpirun needs one to reach it)"
    except subprocess.TimeoutExpired:
        return f"ssh did not answer within {timeout + 5} s"
    if p.returncode != 0:
        return f"ssh -o BatchMode=yes fails: {p.stderr.strip()[-300:] or 'exit %d' % p.returncode}"
    return None


def check_hostfile(hostfile, timeout=5):
    """Every remote host of the hostfile, checked at once (in parallel)."""
    hosts = [(n, h) for n, h in hostfile_hosts(hostfile) if not _is_local(h)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
        problems = list(pool.map(lambda nh: (nh, _reach(nh[1], timeout)), hosts))
    bad = [f"{hostfile} line {n}: host {h} {why}" for (n, h), why in problems if why]
    if bad:
        raise SetupError("unreachable hosts in hostfile:\n  " + "\n  ".join(bad))
