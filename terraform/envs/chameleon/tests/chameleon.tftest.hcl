# The Chameleon root with a mocked provider: bare metal from a lease, no
# security groups, an inventory in the shape inventories/ uses.
mock_provider "openstack" {
  mock_data "openstack_networking_network_v2" {
    defaults = { id = "11111111-2222-3333-4444-555555555555" }
  }
  mock_data "openstack_networking_subnet_v2" {
    defaults = { cidr = "10.140.80.0/22" }
  }
  mock_resource "openstack_networking_floatingip_v2" {
    defaults = { address = "192.0.2.201" }
  }
  mock_resource "openstack_networking_port_v2" {
    defaults = { all_fixed_ips = ["10.140.80.25"] }
  }
}

variables {
  key_pair       = "testbed"
  reservation_id = "0f0e0d0c-0b0a-4999-8888-777766665555"
}

run "bare_metal_from_the_lease" {
  command = apply

  assert {
    condition     = alltrue([for i in module.testbed.instances : contains(["dtn", "perfsonar", "wan_emulator"], i.role)])
    error_message = "The default Chameleon testbed has DTNs, a perfSONAR node and a WAN emulator."
  }
  assert {
    condition     = length(module.testbed.instances) == 4
    error_message = "Expected 4 bare metal nodes by default."
  }
  assert {
    condition     = length(yamldecode(output.inventory).all.children.testbed.children.dtn.hosts) == 2
    error_message = "The inventory lists both DTNs."
  }
  assert {
    condition     = yamldecode(output.inventory).all.children.testbed.children.dtn.hosts["dtn1"].sdmz_interfaces[0].ipv4 == "10.140.80.25/22"
    error_message = "The management interface is the port's address on sharednet1, with that subnet's prefix length."
  }
  assert {
    condition     = yamldecode(output.inventory).all.children.testbed.children.dtn.hosts["dtn1"].sdmz_mgmt_address == "192.0.2.201"
    error_message = "Ansible reaches each node at its floating IP."
  }
  assert {
    condition     = yamldecode(output.inventory).all.children.testbed.vars.ansible_user == "cc"
    error_message = "Chameleon images log in as cc."
  }
}

run "requires_a_reservation_uuid" {
  command = plan
  variables {
    reservation_id = "my-lease-name"
  }
  expect_failures = [var.reservation_id]
}
