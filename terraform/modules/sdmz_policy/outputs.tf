output "flows" {
  description = "Every permitted flow: destination_group, family, protocol, port_min, port_max, source."
  value       = local.flows
}

output "security_group_rules" {
  description = "OpenStack security group rules keyed by flow: group, ethertype, protocol, port_range_min/max, remote_ip_prefix."
  value       = local.security_group_rules
}

output "groups" {
  description = "The groups that receive inbound rules."
  value       = sort(distinct([for f in local.flows : f.destination_group]))
}
