# The Jetstream2 root with a mocked provider: VMs with the derived security
# groups, a management network of its own, SSH only from the control node.
mock_provider "openstack" {
  mock_data "openstack_networking_network_v2" {
    defaults = { id = "11111111-2222-3333-4444-555555555555" }
  }
  mock_resource "openstack_networking_floatingip_v2" {
    defaults = { address = "192.0.2.202" }
  }
  mock_resource "openstack_networking_secgroup_v2" {
    defaults = { id = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee" }
  }
}

variables {
  key_pair           = "testbed"
  mgmt_allowed_cidrs = ["192.0.2.0/28"]
}

run "vms_with_security_groups" {
  command = apply

  assert {
    condition     = length(module.testbed.instances) == 6
    error_message = "The default Jetstream2 testbed has 6 instances."
  }
  assert {
    condition     = length(module.testbed.security_group_rules) > 0
    error_message = "Security groups are derived from the testbed policy."
  }
  assert {
    condition     = yamldecode(output.inventory).all.children.testbed.children.dtn.hosts["dtn1"].sdmz_interfaces[1].mtu == 1500
    error_message = "Jetstream2 defaults to MTU 1500 on the DMZ network."
  }
  assert {
    condition     = yamldecode(output.inventory).all.children.testbed.vars.ansible_user == "ubuntu"
    error_message = "Jetstream2 featured images log in as ubuntu."
  }
}

run "requires_the_control_node_network" {
  command = plan
  variables {
    mgmt_allowed_cidrs = []
  }
  expect_failures = [var.mgmt_allowed_cidrs]
}
