"""Globus Connect Server's command/state logic (module_utils/sdmz_globus.py): each
step is planned only when the state shows it missing, secrets never reach argv,
and bad input is one error per missing key."""
from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import ROOT

_SPEC = importlib.util.spec_from_file_location("sdmz_globus", ROOT / "module_utils" / "sdmz_globus.py")
sdmz_globus = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sdmz_globus)

DESIRED = {
    "client_id": "0c8b6a2e-1111-4222-8333-944455556666", "client_secret": "s3cr3t-value",
    "display_name": "site_a Science DMZ", "organization": "Example University", "owner": "admin@example.edu",
    "contact_email": "noc@example.edu", "deployment_key_path": "/var/lib/globus-connect-server/deployment-key.json",
    "data_ports": [50000, 51000],
    "storage_gateway": {"display_name": "site_a POSIX", "domains": ["example.edu"]},
    "collection": {"display_name": "site_a data", "base_path": "/data"},
}


def steps(state):
    return [s["step"] for s in sdmz_globus.plan(state, DESIRED)]


def test_a_new_endpoint_runs_every_step_in_order():
    assert steps({}) == ["endpoint setup", "node setup", "storage-gateway create", "collection create"]
    plan = sdmz_globus.plan({}, DESIRED)
    assert plan[1]["argv"][-3:] == ["--incoming-port-range", "50000", "51000"]
    assert plan[2]["argv"][-2:] == ["--domain", "example.edu"]
    assert plan[3]["argv"][5] == "{gateway_id}"  # filled in once the gateway exists


def test_a_second_node_only_joins():
    state = {"deployment_key": True, "node_configured": False,
             "gateways": [{"id": "gw-1", "display_name": "site_a POSIX"}],
             "collections": [{"id": "c-1", "display_name": "site_a data"}]}
    assert steps(state) == ["node setup"]


def test_a_configured_node_runs_nothing():
    state = {"deployment_key": True, "node_configured": True,
             "gateways": [{"id": "gw-1", "display_name": "site_a POSIX"}],
             "collections": [{"id": "c-1", "display_name": "site_a data"}]}
    assert steps(state) == []


def test_a_missing_collection_uses_the_existing_gateway():
    state = {"deployment_key": True, "node_configured": True,
             "gateways": [{"id": "gw-1", "display_name": "site_a POSIX"}], "collections": []}
    plan = sdmz_globus.plan(state, DESIRED)
    assert [s["step"] for s in plan] == ["collection create"]
    assert plan[0]["argv"][5] == "gw-1"


def test_the_secret_never_appears_in_any_argv():
    for step in sdmz_globus.plan({}, DESIRED):
        assert DESIRED["client_secret"] not in " ".join(step["argv"])
        assert "login" not in step["argv"]
    env = sdmz_globus.cli_environment(DESIRED, "ep-1")
    assert env["GCS_CLI_CLIENT_SECRET"] == DESIRED["client_secret"] and env["GCS_CLI_ENDPOINT_ID"] == "ep-1"


@pytest.mark.parametrize("key, message", [
    ("client_secret", "globus_connect_server_client_secret: missing (keep it in ansible-vault)"),
    ("client_id", "globus_connect_server_client_id: missing"),
    ("owner", "globus_connect_server_owner: missing"),
])
def test_missing_credentials_are_named(key, message):
    with pytest.raises(sdmz_globus.GlobusError) as error:
        sdmz_globus.check_desired(dict(DESIRED, **{key: ""}))
    assert error.value.problems == [message]


def test_bad_ports_domains_and_paths_are_named():
    bad = dict(DESIRED, data_ports=[51000, 50000], storage_gateway={"display_name": "x", "domains": []},
               collection={"display_name": "y", "base_path": "data"})
    with pytest.raises(sdmz_globus.GlobusError) as error:
        sdmz_globus.check_desired(bad)
    text = "\n".join(error.value.problems)
    assert "globus_connect_server_data_ports" in text
    assert "globus_connect_server_storage_gateway.domains" in text
    assert "globus_connect_server_collection.base_path" in text


def test_cli_list_output_is_read_in_both_shapes():
    paged = json.dumps([{"data": [{"id": "a", "display_name": "A"}]}])
    flat = json.dumps({"data": [{"id": "b", "display_name": "B"}]})
    assert sdmz_globus.find(sdmz_globus.parse_list(paged, "x"), "A")["id"] == "a"
    assert sdmz_globus.find(sdmz_globus.parse_list(flat, "x"), "B")["id"] == "b"
    with pytest.raises(sdmz_globus.GlobusError):
        sdmz_globus.parse_list("not json", "storage-gateway")


def test_endpoint_id_prefers_the_nodes_info():
    assert sdmz_globus.endpoint_id('{"client_id": "from-key"}', '{"endpoint_id": "from-info"}') == "from-info"
    assert sdmz_globus.endpoint_id('{"client_id": "from-key"}') == "from-key"
    assert sdmz_globus.endpoint_id(None) is None
