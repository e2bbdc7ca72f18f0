# The sdmz_testbed module against a mocked OpenStack provider (no cloud is
# reachable from the build machines). Runs that read computed values apply
# against the mock (any Terraform >= 1.7); runs expecting a failure only plan.
mock_provider "openstack" {
  mock_data "openstack_networking_network_v2" {
    defaults = {
      id = "11111111-2222-3333-4444-555555555555"
    }
  }
  mock_data "openstack_networking_subnet_v2" {
    defaults = {
      cidr = "10.140.80.0/22"
    }
  }
  mock_resource "openstack_networking_floatingip_v2" {
    defaults = {
      address = "192.0.2.200"
    }
  }
  mock_resource "openstack_networking_secgroup_v2" {
    defaults = {
      id = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    }
  }
}

variables {
  name_prefix = "sdmz-test"
  image_name  = "CC-Ubuntu22.04"
  key_pair    = "testbed"
  roles = {
    dtn          = { count = 2, flavor = "baremetal", nic_speed_gbps = 25 }
    gateway      = { count = 1, flavor = "baremetal" }
    perfsonar    = { count = 1, flavor = "baremetal" }
    zeek         = { count = 1, flavor = "baremetal" }
    wan_emulator = { count = 1, flavor = "baremetal" }
  }
  mgmt_allowed_cidrs = ["192.0.2.0/28"]
  collaborators = [
    { name = "partner", contact = "noc@partner.example", prefixes_v4 = ["198.51.100.0/24"], prefixes_v6 = ["2001:db8:a000::/48"], services = ["gridftp", "perfsonar"], rtt_ms = 40 },
    { name = "portal", contact = "ops@portal.example", prefixes_v4 = ["203.0.113.0/24"], services = ["globus_connect_server"], rtt_ms = 80 },
  ]
  catalogue = {
    gridftp               = { offered_by = ["dtn"], rules = [{ protocol = "tcp", ports = "2811" }, { protocol = "tcp", ports = "50000-51000" }] }
    globus_connect_server = { offered_by = ["dtn"], rules = [{ protocol = "tcp", ports = "443" }, { protocol = "tcp", ports = "50000-51000" }] }
    perfsonar             = { offered_by = ["perfsonar"], rules = [{ protocol = "tcp", ports = "861" }, { protocol = "udp", ports = "8760-9960" }, { protocol = "icmp" }, { protocol = "icmpv6" }] }
  }
}

run "instances_per_role" {
  command = apply

  assert {
    condition     = length(openstack_compute_instance_v2.this) == 6
    error_message = "Expected 6 instances (2 dtn, 1 gateway, 1 perfsonar, 1 zeek, 1 wan_emulator)."
  }
  assert {
    condition     = length([for i in openstack_compute_instance_v2.this : i if i.metadata.sdmz_role == "dtn"]) == 2
    error_message = "Expected 2 DTNs."
  }
  assert {
    condition     = openstack_compute_instance_v2.this["dtn2"].name == "sdmz-test-dtn2"
    error_message = "Instances are named PREFIX-ROLEN."
  }
  assert {
    condition     = length(openstack_networking_port_v2.remote) == 1 && length(openstack_compute_instance_v2.this["wan1"].network) == 3
    error_message = "The WAN emulator has a third port on the remote network."
  }
}

run "dmz_mtu_and_addresses" {
  command = apply

  assert {
    condition     = openstack_networking_network_v2.dmz.mtu == 9000 && openstack_networking_network_v2.remote[0].mtu == 9000
    error_message = "The DMZ and remote networks carry the DMZ MTU (9000 by default)."
  }
  assert {
    condition     = one(openstack_networking_port_v2.dmz["dtn1"].fixed_ip).ip_address == "10.52.0.10"
    error_message = "dtn1's DMZ address is the dtn base (10) of the DMZ subnet."
  }
  assert {
    condition     = one(openstack_networking_port_v2.dmz["ps1"].fixed_ip).ip_address == "10.52.0.50"
    error_message = "ps1's DMZ address is the perfsonar base (50)."
  }
  assert {
    condition     = openstack_networking_port_v2.dmz["wan1"].port_security_enabled == false
    error_message = "The WAN emulator routes: its DMZ port has no port security."
  }
}

run "reservation_hint" {
  command = apply

  variables {
    reservation_id = "0f0e0d0c-0b0a-4999-8888-777766665555"
  }

  assert {
    condition     = alltrue([for i in openstack_compute_instance_v2.this : one(i.scheduler_hints).additional_properties["reservation"] == "0f0e0d0c-0b0a-4999-8888-777766665555"])
    error_message = "Every instance carries the reservation as a scheduler hint."
  }
}

run "no_reservation_no_hint" {
  command = apply

  assert {
    condition     = alltrue([for i in openstack_compute_instance_v2.this : length(i.scheduler_hints) == 0])
    error_message = "Without a reservation there is no scheduler hint."
  }
}

run "security_groups_from_the_policy" {
  command = apply

  assert {
    condition     = length(openstack_networking_secgroup_rule_v2.service) == length(module.policy.security_group_rules)
    error_message = "One security group rule per policy flow."
  }
  assert {
    # dtn: gridftp 2 rules x (v4 + v6 of partner) + globus 2 rules x v4 of portal = 6;
    # perfsonar: 861 and udp x (v4 + v6) + icmp (v4) + icmpv6 (v6) = 6.
    condition     = length(module.policy.security_group_rules) == 12
    error_message = "Expected 12 distinct collaborator flows."
  }
  assert {
    condition     = openstack_networking_secgroup_rule_v2.service["perfsonar:ipv6:icmpv6:0:0:2001:db8:a000::/48"].protocol == "ipv6-icmp"
    error_message = "ICMPv6 becomes ipv6-icmp with ethertype IPv6."
  }
  assert {
    condition     = openstack_networking_secgroup_rule_v2.service["dtn:ipv4:tcp:50000:51000:203.0.113.0/24"].port_range_max == 51000
    error_message = "Port ranges carry over."
  }
  assert {
    condition     = length(openstack_networking_secgroup_rule_v2.management_ssh) == 1
    error_message = "SSH only from mgmt_allowed_cidrs."
  }
}

run "bare_metal_without_security_groups" {
  command = apply

  variables {
    enable_security_groups = false
  }

  assert {
    condition     = length(openstack_networking_secgroup_rule_v2.service) == 0 && openstack_networking_port_v2.dmz["dtn1"].security_group_ids == null
    error_message = "With security groups disabled (Chameleon bare metal) no group is created or attached."
  }
}

run "floating_ips_by_port" {
  command = apply

  assert {
    condition     = length(openstack_networking_floatingip_associate_v2.management) == 6
    error_message = "Every instance's management port gets a floating IP."
  }
}

run "inventory_output" {
  command = apply

  assert {
    condition     = yamldecode(output.inventory).all.children.testbed.children.dtn.hosts["dtn1"].sdmz_nic_speed_gbps == 25
    error_message = "The inventory carries each role's NIC speed."
  }
  assert {
    condition     = yamldecode(output.inventory).all.children.testbed.children.dtn.hosts["dtn1"].sdmz_interfaces[1].ipv4 == "10.52.0.10/24"
    error_message = "The inventory's DMZ interface address is the port's fixed IP with the subnet's prefix length."
  }
  assert {
    condition     = yamldecode(output.inventory).all.children.testbed.children.dtn.hosts["dtn1"].sdmz_interfaces[1].mtu == 9000
    error_message = "MTU stays a number in the inventory."
  }
  assert {
    condition     = yamldecode(output.inventory).all.children.testbed.children.zeek.hosts["zeek1"].sdmz_interfaces[1].role == "capture"
    error_message = "A Zeek host's DMZ port is its capture interface."
  }
  assert {
    condition     = length(yamldecode(output.inventory).all.vars.sdmz_collaborators) == 2
    error_message = "The collaborators pass into the inventory unchanged."
  }
}

run "rejects_unknown_role" {
  command = plan
  variables {
    roles = { firewall = { count = 1, flavor = "m1" } }
  }
  expect_failures = [var.roles]
}

run "rejects_negative_count" {
  command = plan
  variables {
    roles = { dtn = { count = -1, flavor = "m1" } }
  }
  expect_failures = [var.roles]
}

run "rejects_invalid_cidr" {
  command = plan
  variables {
    dmz_cidr = "10.52.0.0/33"
  }
  expect_failures = [var.dmz_cidr]
}

run "rejects_bad_mtu" {
  command = plan
  variables {
    dmz_mtu = 9300
  }
  expect_failures = [var.dmz_mtu]
}

run "rejects_bad_reservation" {
  command = plan
  variables {
    reservation_id = "my-lease"
  }
  expect_failures = [var.reservation_id]
}
