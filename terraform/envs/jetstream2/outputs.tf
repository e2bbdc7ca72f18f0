output "inventory" {
  description = "Ansible inventory: terraform output -raw inventory > ../../../inventories/testbed/hosts.yml"
  value       = module.testbed.inventory
}

output "instances" {
  description = "Per instance: role, management address, DMZ address."
  value       = module.testbed.instances
}
