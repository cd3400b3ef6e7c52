"""A throwaway Postfix for the tests of mail in: Debian's postfix package (installed with
apt-get when missing), run from a configuration written into a temp dir, which relays one
domain to txcl over LMTP on a Unix socket and delivers nothing anywhere else.

This is the recipe of the Mail-in guide (docs/mail.md), shrunk to a test instance: no smtpd
(mail is submitted with `sendmail`), no chroot, its own queue and log file. Postfix's master
runs as root and its delivery agents as the `postfix` user, so this needs root (or sudo for
the install only, and then root anyway): the tests that use it run as root in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path


class PostfixUnavailable(RuntimeError):
    pass


_MASTER_CF = """\
pickup    unix  n  -  n  60    1  pickup
cleanup   unix  n  -  n  -     0  cleanup
qmgr      unix  n  -  n  300   1  qmgr
rewrite   unix  -  -  n  -     -  trivial-rewrite
bounce    unix  -  -  n  -     0  bounce
defer     unix  -  -  n  -     0  bounce
trace     unix  -  -  n  -     0  bounce
verify    unix  -  -  n  -     1  verify
flush     unix  n  -  n  1000? 0  flush
proxymap  unix  -  -  n  -     -  proxymap
error     unix  -  -  n  -     -  error
retry     unix  -  -  n  -     -  error
discard   unix  -  -  n  -     -  discard
lmtp      unix  -  -  n  -     -  lmtp
anvil     unix  -  -  n  -     1  anvil
scache    unix  -  -  n  -     1  scache
postlog   unix-dgram n - n -   1  postlogd
"""


def install_postfix() -> None:
    """Install Debian's postfix package without configuring a system mail server."""
    apt = shutil.which("apt-get")
    if apt is None:
        raise PostfixUnavailable("postfix is not installed and there is no apt-get to install it")
    if os.geteuid() != 0:
        raise PostfixUnavailable("postfix is not installed; the Postfix tests install it as root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["debconf-set-selections"], input="postfix postfix/main_mailer_type select No configuration\n",
                   text=True, capture_output=True, check=False)
    done = subprocess.run([apt, "install", "-y", "-qq", "postfix"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        subprocess.run([apt, "update", "-qq"], env=env, capture_output=True, check=False)
        done = subprocess.run([apt, "install", "-y", "-qq", "postfix"], env=env, capture_output=True, text=True)
    if done.returncode != 0 or shutil.which("postfix") is None:
        raise PostfixUnavailable(f"apt-get install postfix failed: {done.stderr.strip()[-400:]}")


class TempPostfix:
    """`TempPostfix.start(domain, socket_path)`: mail to `domain` goes to txcl's LMTP socket."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "conf"
        self.maillog = root / "maillog"

    @classmethod
    def start(cls, domain: str, lmtp_socket: Path) -> "TempPostfix":
        if os.geteuid() != 0:
            raise PostfixUnavailable("a Postfix instance needs root (its master starts as root)")
        if shutil.which("postfix") is None:
            install_postfix()
        root = Path(tempfile.mkdtemp(prefix="txcl-postfix-", dir="/tmp"))
        root.chmod(0o755)  # Postfix's own processes run as the postfix user
        self = cls(root)
        self.conf.mkdir()
        (root / "queue").mkdir()
        (root / "data").mkdir()
        shutil.chown(root / "data", user="postfix")
        (self.conf / "master.cf").write_text(_MASTER_CF)
        (self.conf / "main.cf").write_text(f"""\
compatibility_level = 3.6
myhostname = txcl-test.localdomain
mydestination =
inet_interfaces = loopback-only
inet_protocols = ipv4
queue_directory = {root}/queue
data_directory = {root}/data
mail_owner = postfix
setgid_group = postdrop
maillog_file_prefixes = {root}
maillog_file = {self.maillog}
alias_maps =
alias_database =
smtputf8_enable = no
relay_domains = {domain}
relay_transport = lmtp:unix:{lmtp_socket}
default_transport = error:this test instance delivers no other mail
""")
        done = subprocess.run(["postfix", "-c", str(self.conf), "start"], capture_output=True, text=True)
        if done.returncode != 0:
            log = self.log()
            self.stop()
            raise PostfixUnavailable(f"postfix did not start: {done.stderr.strip()} {log[-600:]}")
        return self

    def sendmail(self, message: bytes, sender: str, recipients: list[str]) -> None:
        """Submit a message as a local program would (Postfix's sendmail)."""
        env = {**os.environ, "MAIL_CONFIG": str(self.conf)}
        done = subprocess.run(["sendmail", "-f", sender, "--", *recipients], input=message, env=env,
                              capture_output=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"sendmail failed: {done.stderr.decode(errors='replace')}")

    def flush(self) -> None:
        """Try the deferred mail again now."""
        subprocess.run(["postqueue", "-c", str(self.conf), "-f"], capture_output=True, timeout=30, check=False)

    def log(self) -> str:
        try:
            return self.maillog.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        """The first log line holding `text`."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for line in self.log().splitlines():
                if text in line:
                    return line
            time.sleep(0.1)
        raise AssertionError(f"Postfix never logged {text!r}; its log:\n{self.log()[-3000:]}")

    def stop(self) -> None:
        subprocess.run(["postfix", "-c", str(self.conf), "stop"], capture_output=True, timeout=30, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


__all__ = ["TempPostfix", "PostfixUnavailable", "install_postfix"]
