"""The directories Armillary keeps code in between runs, private to the user who runs it.

Compiled kernels (Numba's cache: its index files are pickles, loaded as code), generated model modules
(imported), derivation results (their text becomes a generated module) and compile locks (which another
user could hold forever) all live in directories that nobody but their owner may write, as OpenSSH's
StrictModes refuses keys in a directory others can write and pip refuses a cache it does not own:

- ``$NUMBA_CACHE_DIR`` when it is set (Numba's own default, ``__pycache__`` next to Armillary's installed
  code, is as trusted as that code);
- the model cache: ``$ARMILLARY_MODEL_CACHE``, else ``armillary-models`` under ``$NUMBA_CACHE_DIR``, else
  ``armillary/armillary-models`` under ``$XDG_CACHE_HOME`` (``~/.cache``);
- the compile locks: in ``$NUMBA_CACHE_DIR``, else in ``armillary/locks`` under the user's cache directory
  (never a fixed name in the shared temporary directory).

:func:`private_directory` creates a missing one with mode 0700 and refuses, in one line naming it, an
existing one that is a symbolic link, is owned by another user, or is writable by group or others, or that
lies in a directory another user (root aside) owns or could rename it in: a handful of ``stat`` calls
(tens of microseconds) each time a run is about to use one.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import tempfile

from .errors import InvalidInput

#: the variable that names each directory, for the messages
KERNEL_CACHE = "NUMBA_CACHE_DIR"
MODEL_CACHE = "ARMILLARY_MODEL_CACHE"


def _owner(uid: int) -> str:
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _unsafe(path: str, info: os.stat_result, leaf: bool) -> str | None:
    """Why another user could write into ``path`` (``info``: its lstat), or None."""
    me = os.geteuid()
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory" if leaf else None  # then it cannot be made: said so by the caller
    if info.st_uid != me and (leaf or info.st_uid != 0):
        return f"is owned by {_owner(info.st_uid)}, not by you ({_owner(me)})"
    writable_by_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable_by_others and (leaf or not info.st_mode & stat.S_ISVTX):
        return f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def private_directory(path: str, variable: str) -> str:
    """``path`` (absolute), a directory only this user can write: created with mode 0700 (and any missing
    parents) if absent.  InvalidInput naming ``variable`` and the directory if it, or a directory above it,
    is a place another user could write or swap (see the module's docstring); nothing is written then."""
    path = os.path.abspath(os.path.expanduser(path))
    parent = os.path.dirname(path)
    # the directories above, as the kernel resolves them: each owned by this user or root, and not writable by
    # others unless sticky (as /tmp: nobody can rename what they do not own in it)
    resolved = os.path.realpath(parent)
    for above in (resolved, *_ancestors(resolved)):
        try:
            info = os.stat(above)
        except OSError:
            continue  # not created yet: made below, by this user
        why = _unsafe(above, info, leaf=False)
        if why:
            raise InvalidInput(variable, f"{path} lies in {above}, which {why}: another user could replace it; "
                               "choose a directory of your own")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as error:
        raise InvalidInput(variable, f"cannot create {path}: {error.strerror}") from None
    why = _unsafe(path, info, leaf=True)
    if why:
        raise InvalidInput(variable, f"{path} {why}: refusing to load code from it (Armillary keeps compiled and "
                           "generated code only in directories no other user can write; use a fresh one, or "
                           "chmod go-w it if it is yours)")
    return path


def _ancestors(path: str):
    while True:
        above = os.path.dirname(path)
        if above == path:
            return
        yield above
        path = above


def user_cache_base() -> str:
    """Armillary's directory in the user's cache: ``$XDG_CACHE_HOME/armillary`` (``~/.cache/armillary``)."""
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "armillary")


def model_cache_directory() -> str:
    """Where generated model modules and derivation results live (checked private, created 0700):
    ``$ARMILLARY_MODEL_CACHE``, else ``armillary-models`` under ``$NUMBA_CACHE_DIR`` (node-local on
    clusters), else under the user's cache directory."""
    if os.environ.get(MODEL_CACHE):
        return private_directory(os.environ[MODEL_CACHE], MODEL_CACHE)
    if os.environ.get(KERNEL_CACHE):
        kernel_cache_directory()
        return private_directory(os.path.join(os.environ[KERNEL_CACHE], "armillary-models"), KERNEL_CACHE)
    return private_directory(os.path.join(user_cache_base(), "armillary-models"), "XDG_CACHE_HOME")


def kernel_cache_directory() -> str | None:
    """``$NUMBA_CACHE_DIR`` checked private (created 0700), or None when it is not set (Numba then caches
    next to Armillary's installed code).  Called before any cached kernel is loaded."""
    directory = os.environ.get(KERNEL_CACHE)
    return private_directory(directory, KERNEL_CACHE) if directory else None


def lock_directory() -> str:
    """Where the compile locks live: the kernel cache they guard, else ``locks`` in the user's cache."""
    return kernel_cache_directory() or private_directory(os.path.join(user_cache_base(), "locks"), "XDG_CACHE_HOME")


def write_file(directory: str, name: str, text: str) -> str:
    """Write ``text`` to ``directory``/``name`` atomically (a temporary file of mode 0600, then renamed: a
    concurrent reader never sees half of it); returns the path."""
    handle, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(text)
    path = os.path.join(directory, name)
    os.replace(temporary, path)
    return path


def read_file(path: str) -> str | None:
    """The text of ``path``, or None if it cannot be read as UTF-8."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


#: the secret that signs derivation results in a model cache (32 random bytes, mode 0600)
SIGNING_KEY = "signing.key"


def _signing_key(directory: str) -> bytes:
    """The model cache's signing key, made on first use (written aside, then linked into place: two processes
    making it at once end up with the same one)."""
    path = os.path.join(directory, SIGNING_KEY)
    for _ in range(2):
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            handle, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
            with os.fdopen(handle, "wb") as stream:
                stream.write(secrets.token_bytes(32))
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass
            os.unlink(temporary)
            continue
        except OSError as error:
            raise InvalidInput(MODEL_CACHE, f"cannot read {path}: {error.strerror}") from None
        with os.fdopen(descriptor, "rb") as stream:
            info = os.fstat(stream.fileno())
            if info.st_uid != os.geteuid() or info.st_mode & 0o077 or not stat.S_ISREG(info.st_mode):
                raise InvalidInput(MODEL_CACHE, f"{path} must be a file of yours that only you can read "
                                   f"(mode {stat.S_IMODE(info.st_mode):04o}); delete it and a new one is made")
            return stream.read()
    raise InvalidInput(MODEL_CACHE, f"cannot create {path}")


def signature(directory: str, text: str) -> str:
    """HMAC-SHA256 of ``text`` under the signing key of the model cache ``directory``: what a derivation
    result written by this user's Armillary carries, so that a result another hand wrote (or changed) is
    told apart before its text is ever imported."""
    return hmac.new(_signing_key(directory), text.encode(), hashlib.sha256).hexdigest()


def signed_by_this_cache(directory: str, text: str, mac: str) -> bool:
    return isinstance(mac, str) and hmac.compare_digest(signature(directory, text), mac)


def create_kernel_cache() -> None:
    """Make a missing ``$NUMBA_CACHE_DIR`` with mode 0700 now, before Numba makes it with the umask's mode
    (it does when a module with a cached function is imported); whether it may be used is checked, by
    :func:`kernel_cache_directory`, before any kernel is loaded from it."""
    directory = os.environ.get(KERNEL_CACHE)
    if directory:
        try:
            os.makedirs(os.path.expanduser(directory), mode=0o700, exist_ok=True)
        except OSError:
            pass  # refused, naming it, where it is used
