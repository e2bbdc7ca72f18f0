output "inventory" {
  description = "The Ansible inventory (YAML), in the shape inventories/ uses."
  value       = module.inventory.inventory
}

output "instances" {
  description = "Per instance: role, management address (floating IP or fixed), DMZ address."
  value = {
    for k, v in local.instances : k => {
      role         = v.role
      mgmt_address = var.assign_floating_ips ? openstack_networking_floatingip_v2.management[k].address : local.mgmt_fixed_ip[k]
      dmz_address  = cidrhost(var.dmz_cidr, v.host_number)
    }
  }
}

output "security_group_rules" {
  description = "The collaborator rules, keyed by flow (from the policy module)."
  value       = module.policy.security_group_rules
}

output "dmz_network_id" {
  description = "ID of the DMZ network."
  value       = openstack_networking_network_v2.dmz.id
}
