"""The gateway-to-gateway leg over TLS 1.3 with mutual certificates: two
sdmz-proxy daemons (producer side, consumer side) on loopback, both builds,
with a PKI made for the test (the `cryptography` package Ansible ships with)."""
from __future__ import annotations

import datetime
import hashlib
import os
import select
import signal
import socket
import ssl
import struct
import subprocess
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cprogram import assert_no_sanitizer_report
from proxyctl import (Proxy, Sink, bindir, builds, free_port_block, proxy,  # noqa: F401
                      recv_all, send_and_confirm, send_records,
                      stalling_listener, wait_for, whole_records)



class Pki:
    """A CA and leaf certificates (DNS SAN = the name), as PEM files."""

    def __init__(self, directory: Path, ca_name: str = "sdmz-test-ca"):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
        self.cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                                  False, False), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.ca_file = self.dir / "ca.pem"
        self.ca_file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                .issuer_name(self.cert.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]),
                               critical=False)
                .sign(self.key, hashes.SHA256()))
        cert_file, key_file = self.dir / (name + ".pem"), self.dir / (name + ".key")
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        key_file.chmod(0o600)
        return cert_file, key_file


@pytest.fixture
def pki(tmp_path) -> Pki:
    return Pki(tmp_path / "pki")


def tls_proxy(bindir: Path, workdir: Path, pki: Pki, name: str) -> Proxy:
    cert, key = pki.issue(name)
    p = Proxy(bindir, workdir, ports=4)
    p.write_config(tls_cert=str(cert), tls_key=str(key), tls_ca=str(pki.ca_file))
    return p.start()


@pytest.fixture
def gateways(bindir, tmp_path, pki):
    """gw1 (producer side, TLS client) and gw2 (consumer side, TLS server)."""
    gw1 = tls_proxy(bindir, tmp_path / "gw1", pki, "gw1")
    gw2 = tls_proxy(bindir, tmp_path / "gw2", pki, "gw2")
    yield gw1, gw2
    for gw in (gw1, gw2):
        if gw.proc is not None:
            rc = gw.stop()
            log = gw.log_text()
            assert_no_sanitizer_report(log)
            assert rc == 0, log[-2000:]


class Tap:
    """A plain TCP forwarder that keeps what it carried one way: what an
    observer on the WAN between the two gateways would see."""

    def __init__(self, port: int, target: int):
        self.seen = bytearray()
        self.server = socket.create_server(("127.0.0.1", port))
        self.target = target
        self.outbound: socket.socket | None = None
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        try:
            inbound, _ = self.server.accept()
        except OSError:
            return
        outbound = self.outbound = socket.create_connection(("127.0.0.1", self.target))
        for args in ((inbound, outbound, True), (outbound, inbound, False)):
            self.threads.append(threading.Thread(target=self._pipe, args=args, daemon=True))
            self.threads[-1].start()

    def _pipe(self, src: socket.socket, dst: socket.socket, keep: bool):
        # Poll, never block in recv(): a socket closed while another thread
        # sits in recv() is only released (and its RST sent) when it returns.
        try:
            while not self.stopping.is_set():
                if not select.select([src], [], [], 0.1)[0]:
                    continue
                chunk = src.recv(1 << 16)
                if not chunk:
                    dst.shutdown(socket.SHUT_WR)
                    return
                if keep:
                    self.seen += chunk
                dst.sendall(chunk)
        except OSError:
            pass

    def reset(self):
        """Cut the leg towards the consumer's gateway with a TCP reset."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=10)
        self.outbound.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.outbound.close()

    def close(self):
        self.server.close()


def pair(gw1: Proxy, gw2: Proxy, consumer_port: int, wan_port: int | None = None,
         consumer_side: dict | None = None, **extra):
    """A stream request on both gateways: gw1:port -> (TLS) -> gw2:port -> consumer."""
    gw2.create("tls-stream", gw2.port_min, consumer_port, side="consumer", tls="listen",
               tls_peer="gw1", **(extra if consumer_side is None else consumer_side))
    gw1.create("tls-stream", gw1.port_min, wan_port or gw2.port_min, side="producer",
               tls="connect", tls_peer="gw2", **extra)


def test_tls_leg_carries_bytes_intact_and_encrypted(gateways):
    """16 MiB through gw1 -> TLS -> gw2 arrive intact; the answer comes back over
    the same session; an observer between the gateways sees TLS records only."""
    gw1, gw2 = gateways
    consumer, wan = free_port_block(1), free_port_block(1)
    sink = Sink(consumer)
    tap = Tap(wan, gw2.port_min)
    pair(gw1, gw2, consumer, wan_port=wan)
    marker = b"SCIENCE-DMZ-PLAINTEXT-MARKER"
    payload = (marker + os.urandom(4096)) * 4000
    assert send_and_confirm(gw1.port_min, payload) == \
        "sha256=" + hashlib.sha256(payload).hexdigest()
    wait_for(lambda: len(tap.seen) > len(payload))
    assert tap.seen[0] == 0x16 and tap.seen[1] == 0x03  # a TLS handshake record
    assert marker not in tap.seen
    for gw, peer in ((gw1, "gw2"), (gw2, "gw1")):
        log = gw.log_text()
        assert "tls-stream ch0: TLSv1.3 with %s" % peer in log, log[-2000:]
        assert "kTLS " in log  # the kernel's answer is reported, whatever it is
        assert gw.stats()["channels"][0]["tls_failures"] == "0"
    sink.close()
    tap.close()


def test_tls_refuses_other_cas_other_names_and_plain_tcp(gateways, tmp_path, pki):
    """gw2 admits only a client certificate from its CA naming the request's
    tls-peer; each refusal is counted and logged, and nothing reaches the consumer."""
    gw1, gw2 = gateways
    consumer = free_port_block(1)
    sink = Sink(consumer)
    pair(gw1, gw2, consumer)

    rogue = Pki(tmp_path / "rogue", ca_name="rogue-ca")
    attempts = [rogue.issue("gw1"), pki.issue("gw3")]
    for cert, key in attempts:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_cert_chain(cert, key)
        ctx.load_verify_locations(pki.ca_file)
        ctx.check_hostname = True
        with socket.create_connection(("127.0.0.1", gw2.port_min), timeout=10) as raw:
            with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
                with ctx.wrap_socket(raw, server_hostname="gw2") as tls:
                    # TLS 1.3: the server judges the client's certificate after
                    # the client finished; its refusal arrives on the first read.
                    tls.sendall(b"must not be relayed")
                    assert tls.recv(10) == b"", "a refused client was relayed"
    with socket.create_connection(("127.0.0.1", gw2.port_min), timeout=10) as plain:
        plain.sendall(b"GET / HTTP/1.0\r\n\r\n")
        plain.settimeout(10)
        try:
            while plain.recv(4096):
                pass
        except ConnectionResetError:
            pass
    stats = wait_for(lambda: (c := gw2.stats()["channels"][0]) and
                     int(c["tls_failures"]) == 3 and c["conns"] == "0" and c)
    assert stats["bytes_forward"] == "0"
    assert all(data == b"" for data in sink.received)
    log = gw2.log_text()
    assert "peer certificate: unable to get local issuer certificate" in log, log[-3000:]
    assert "peer certificate: hostname mismatch" in log, log[-3000:]
    assert 'sdmz_proxy_tls_failures_total{request="tls-stream",channel="0"} 3' in gw2.metrics()
    sink.close()


def test_tls_client_refuses_a_gateway_with_the_wrong_name(bindir, tmp_path, pki):
    """gw1 expects gw2; a gateway showing gw3's certificate (same CA) is refused
    and the producer's connection closed."""
    gw1 = tls_proxy(bindir, tmp_path / "gw1", pki, "gw1")
    impostor = tls_proxy(bindir, tmp_path / "gw3", pki, "gw3")
    try:
        consumer = free_port_block(1)
        sink = Sink(consumer)
        impostor.create("tls-stream", impostor.port_min, consumer, side="consumer",
                        tls="listen", tls_peer="gw1")
        gw1.create("tls-stream", gw1.port_min, impostor.port_min, tls="connect", tls_peer="gw2")
        with socket.create_connection(("127.0.0.1", gw1.port_min), timeout=10) as producer:
            producer.sendall(b"secret" * 1000)
            producer.settimeout(10)
            try:
                assert producer.recv(10) == b""
            except ConnectionResetError:
                pass
        wait_for(lambda: gw1.stats()["channels"][0]["tls_failures"] == "1")
        assert "peer certificate: hostname mismatch" in gw1.log_text()
        assert all(data == b"" for data in sink.received)
        sink.close()
    finally:
        for gw in (gw1, impostor):
            rc = gw.stop()
            assert rc == 0
            assert_no_sanitizer_report(gw.log_text())


@pytest.mark.parametrize("cut", ["gateway-killed", "wan-reset"])
def test_a_cut_tls_stream_resets_the_consumer(gateways, cut):
    """gw1 dies (SIGKILL) or the WAN leg is reset mid-stream: gw2 sees no
    close_notify and resets the consumer's connection instead of ending it as
    if the stream were complete."""
    gw1, gw2 = gateways
    consumer, wan = free_port_block(1), free_port_block(1)
    server = socket.create_server(("127.0.0.1", consumer))
    tap = Tap(wan, gw2.port_min)
    pair(gw1, gw2, consumer, wan_port=wan)
    producer = socket.create_connection(("127.0.0.1", gw1.port_min), timeout=10)
    conn, _ = server.accept()
    producer.sendall(b"z" * 100000)
    conn.settimeout(10)
    got = 0
    while got < 100000:
        got += len(conn.recv(1 << 16))
    if cut == "gateway-killed":
        gw1.proc.send_signal(signal.SIGKILL)
        gw1.proc.wait(timeout=10)
        gw1.proc = None
    else:
        tap.reset()
    with pytest.raises(ConnectionResetError):
        while conn.recv(1 << 16):
            pass
    log = gw2.log_text()
    assert ("unexpected eof" if cut == "gateway-killed" else "client side reset") in log, log[-2000:]
    tap.close()
    producer.close()
    conn.close()
    server.close()


def test_drop_oldest_over_tls_keeps_records_whole(gateways):
    """A stalled consumer behind the TLS leg; gw2 blocks, so gw1 must drop whole
    records while OpenSSL holds a record it could not send yet (the TLS write
    retry): what arrives is whole records, in order, the newest kept."""
    gw1, gw2 = gateways
    record, count = 1024, 32768  # 32 MiB: more than every socket buffer on the path
    consumer = free_port_block(1)
    server = stalling_listener(consumer)
    pair(gw1, gw2, consumer, buffer="64K", policy="drop-oldest", record=str(record),
         consumer_side={"buffer": "64K"})
    producer = socket.create_connection(("127.0.0.1", gw1.port_min), timeout=20)
    conn, _ = server.accept()  # not read yet: the consumer stalls
    send_records(producer, count, record)
    wait_for(lambda: int(gw1.stats()["channels"][0]["dropped_bytes"]) > 0)
    indexes = whole_records(recv_all(conn, 20), record)
    assert indexes[-1] == count - 1
    producer.close()
    conn.close()
    server.close()


def test_tls_requests_and_configs_are_checked(bindir, tmp_path, pki, proxy):
    """A TLS request on a proxy without certificates, a TLS request without a
    peer name, half a TLS config, a key that is not the certificate's: each is
    one clear error, and nothing starts."""
    result = proxy.ctl("create", "--id", "t", "--side", "producer", "--channels", "1",
                       "--listen", "127.0.0.1:%d" % proxy.port_min, "--connect",
                       "127.0.0.1:9", "--allow", "127.0.0.1/32", "--tls", "connect",
                       "--tls-peer", "gw2")
    assert result.returncode == 1 and "tls: this proxy has no certificate" in result.stdout + result.stderr
    result = proxy.ctl("create", "--id", "t", "--side", "producer", "--channels", "1",
                       "--listen", "127.0.0.1:%d" % proxy.port_min, "--connect",
                       "127.0.0.1:9", "--allow", "127.0.0.1/32", "--tls", "connect")
    assert result.returncode == 1 and "tls-peer: required" in result.stdout + result.stderr
    assert proxy.ctl("list").stdout.count("id=") == 0

    cert, key = pki.issue("gw1")
    other_cert, _ = pki.issue("gw9")
    config = tmp_path / "half.conf"
    config.write_text("tls_cert = %s\n" % cert)
    check = subprocess.run([str(bindir / "sdmz-proxy"), "check", "--config", str(config)],
                           capture_output=True, text=True, timeout=30)
    assert check.returncode == 2 and "give all three or none" in check.stderr
    config.write_text("tls_cert = %s\ntls_key = %s\ntls_ca = %s\n" % (other_cert, key, pki.ca_file))
    check = subprocess.run([str(bindir / "sdmz-proxy"), "check", "--config", str(config)],
                           capture_output=True, text=True, timeout=30)
    assert check.returncode == 2 and "tls_key %s" % key in check.stderr, check.stderr
    serve = subprocess.run([str(bindir / "sdmz-proxy"), "serve", "--config", str(config)],
                           capture_output=True, text=True, timeout=30)
    assert serve.returncode != 0 and "tls_key" in serve.stderr


def served_certificate(port: int, pki: Pki) -> bytes:
    """The certificate a TLS-listening request shows a client named gw1."""
    cert, key = pki.issue("gw1")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(pki.ca_file)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="gw2") as tls:
            return tls.getpeercert(binary_form=True)


def test_sighup_rotates_certificates_and_refuses_to_drop_tls_under_tls_requests(gateways, pki):
    """A new certificate is taken at SIGHUP and new sessions use it; a reload
    that would leave TLS requests without a certificate is refused whole."""
    gw1, gw2 = gateways
    consumer = free_port_block(1)
    sink = Sink(consumer)
    pair(gw1, gw2, consumer)
    payload = os.urandom(1 << 20)
    expected = "sha256=" + hashlib.sha256(payload).hexdigest()
    assert send_and_confirm(gw1.port_min, payload) == expected

    cert, key = pki.issue("gw2")  # same name, new key: the rotation
    gw2.write_config(tls_cert=str(cert), tls_key=str(key), tls_ca=str(pki.ca_file))
    gw2.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "reloaded" in gw2.log_text())
    assert send_and_confirm(gw1.port_min, payload) == expected
    assert served_certificate(gw2.port_min, pki) == ssl.PEM_cert_to_DER_cert(cert.read_text())

    gw2.write_config()  # no TLS at all
    gw2.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "uses tls and the new config has no tls_cert" in gw2.log_text())
    assert send_and_confirm(gw1.port_min, payload) == expected
    assert gw2.stats()["channels"][0]["tls_failures"] == "0"
    sink.close()
