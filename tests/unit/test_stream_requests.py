"""The stream requests each gateway holds, derived from `sdmz_streams`, and the
request module's plan: the TLS leg in particular."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from sdmz_stream_request import normalise, plan
from sdmz_streams import sdmz_stream_requests

HOSTVARS = {
    "gw1": {"sdmz_interfaces": [{"role": "dmz", "ipv4": "198.18.1.2/24"}]},
    "gw2": {"sdmz_interfaces": [{"role": "dmz", "ipv4": "198.18.2.2/24"}],
            "stream_proxy_tls_name": "gw2.dmz.example.edu"},
}
STREAM = {"id": "beam", "producer": {"gateway": "gw1", "sources": ["198.18.1.0/24"]},
          "consumer": {"gateway": "gw2", "host": "198.18.2.11", "port": 6000},
          "channels": 2, "port": 5100}


def derive(host, **stream):
    return sdmz_stream_requests([dict(STREAM, **stream)], HOSTVARS, host, ["gw1", "gw2"],
                                "5100-5199")


def test_tls_names_the_other_gateways_certificate_on_each_side():
    producer, = derive("gw1", tls=True)
    consumer, = derive("gw2", tls=True)
    assert (producer["tls"], producer["tls-peer"]) == ("connect", "gw2.dmz.example.edu")
    assert (consumer["tls"], consumer["tls-peer"]) == ("listen", "gw1")


def test_without_tls_no_peer_name_is_sent():
    request, = derive("gw1")
    assert request["tls"] == "none" and "tls-peer" not in request


def test_tls_must_be_a_boolean():
    with pytest.raises(AnsibleFilterError, match=r"sdmz_streams\[0\]\.tls: true or false"):
        derive("gw1", tls="yes")


def test_turning_tls_on_or_off_recreates_the_request():
    listed = normalise({"id": "beam", "side": "producer", "channels": 2,
                        "listen": "198.18.1.2:5100", "connect": "198.18.2.2:5100",
                        "allow": "198.18.1.0/24", "policy": "block", "rate": 0})
    plain = {"beam": normalise(dict(derive("gw1")[0]))}
    secure = {"beam": normalise(dict(derive("gw1", tls=True)[0]))}
    assert plan({"beam": listed}, plain, ["producer"], True) == ([], [], [], [])
    assert plan({"beam": listed}, secure, ["producer"], True) == ([], [], ["beam"], [])
    listed_tls = dict(listed, tls="connect", **{"tls-peer": "gw2.dmz.example.edu"})
    assert plan({"beam": listed_tls}, secure, ["producer"], True) == ([], [], [], [])
    assert plan({"beam": listed_tls}, plain, ["producer"], True) == ([], [], ["beam"], [])
