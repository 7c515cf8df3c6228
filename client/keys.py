"""CurveZMQ keys on the client's side: key files (ZeroMQ's certificate format, `tgsctl keygen`
writes a client's pair), the rule that tells a server key from a key file on the command line,
and what a client socket needs for a --listen endpoint.  The controller's side of CurveZMQ (its
key pair, the authorized keys, the ZAP handler) is tgs.controller.auth."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.utils.z85

KEY_LEN = 40                          # Z85 text of a 32-byte key


class KeyFileError(Exception):
    """A key file that is missing, malformed or not private enough."""


def z85_ok(key: bytes) -> bool:
    """Whether `key` is the 40-character Z85 text of a 32-byte key."""
    if len(key) != KEY_LEN:
        return False
    try:
        return len(zmq.utils.z85.decode(key)) == 32
    except (ValueError, KeyError, TypeError):
        return False


def write_keypair(directory: Path, name: str) -> tuple[Path, Path]:
    """Create `name.key` (public, 0644) and `name.key_secret` (0600) in `directory`;
    an existing pair is an error (never overwritten)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    public, secret = zmq.curve_keypair()
    pub_path, sec_path = directory / f"{name}.key", directory / f"{name}.key_secret"
    banner = "#   TGS CurveZMQ key ({}), ZeroMQ certificate format\n"
    for path, body, mode in (
            (sec_path, f'curve\n    public-key = "{public.decode()}"\n'
                       f'    secret-key = "{secret.decode()}"\n', 0o600),
            (pub_path, f'curve\n    public-key = "{public.decode()}"\n', 0o644)):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode)
        with os.fdopen(fd, "w") as f:
            f.write(banner.format("secret" if mode == 0o600 else "public") + "metadata\n" + body)
        os.chmod(path, mode)             # whatever the umask
    return pub_path, sec_path


def read_key_file(path: Path, need_secret: bool) -> tuple[bytes, bytes | None]:
    """(public, secret) from a certificate file; a secret one must be private (0600)."""
    try:
        st = os.stat(path)
        text = Path(path).read_bytes()[:4096]
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc.strerror}") from None
    public = secret = None
    for line in text.splitlines():
        line = line.strip()
        for tag in (b"public-key", b"secret-key"):
            if line.startswith(tag) and b"=" in line:
                val = line.split(b"=", 1)[1].strip(b" \t'\"")
                if tag == b"public-key":
                    public = val
                else:
                    secret = val
    if public is None or not z85_ok(public):
        raise KeyFileError(f"{path}: no valid public-key")
    if need_secret:
        if secret is None or not z85_ok(secret):
            raise KeyFileError(f"{path}: no valid secret-key")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise KeyFileError(f"{path}: a secret key file must be private (chmod 600)")
    return public, secret


KEY_PREFIX = "key:"
FILE_PREFIX = "file:"
_PATH_START = ("/", "./", "../", "~")


def parse_public_key(spec: str) -> bytes:
    """A public key given on the command line (--server-key, $TGS_SERVER_KEY).

    Z85's alphabet has '/' and '.', so a 40-character path can also read as a key; the rule:
    `key:KEY` is always a key and `file:PATH` always a file; otherwise a value naming an
    existing file is that file, one that starts like a path (/ ./ ../ ~) is a file too (a
    missing one is an error, never a key), and anything else must be the 40-character key."""
    if spec.startswith(KEY_PREFIX):
        raw = spec[len(KEY_PREFIX):].encode("ascii", "replace")
        if not z85_ok(raw):
            raise KeyFileError(f"{spec[:60]!r} is not key:<the 40-character Z85 public key>")
        return raw
    if spec.startswith(FILE_PREFIX):
        return read_key_file(Path(spec[len(FILE_PREFIX):]).expanduser(), need_secret=False)[0]
    path = Path(spec).expanduser()
    if path.exists():
        return read_key_file(path, need_secret=False)[0]
    if spec.startswith(_PATH_START):
        raise KeyFileError(f"no server key file {spec[:200]} (a key that starts so: write "
                           "key:KEY)")
    raw = spec.encode("ascii", "replace")
    if z85_ok(raw):
        return raw
    raise KeyFileError(f"server key {spec[:60]!r} is neither a key file nor a 40-character Z85 "
                       "key (key:KEY or file:PATH say which)")


@dataclass(frozen=True)
class ClientKeys:
    """What a client needs for a CURVE endpoint."""

    server_public: bytes
    public: bytes
    secret: bytes

    def apply(self, sock: zmq.Socket) -> None:
        sock.curve_serverkey = self.server_public
        sock.curve_publickey = self.public
        sock.curve_secretkey = self.secret


def client_keys(server_key: str, client_key: str) -> ClientKeys:
    public, secret = read_key_file(Path(client_key), need_secret=True)
    assert secret is not None
    return ClientKeys(parse_public_key(server_key), public, secret)
