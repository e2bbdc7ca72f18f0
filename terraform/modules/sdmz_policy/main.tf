# The permitted flows, derived exactly as the Ansible side's sdmz_policy_flows
# filter derives them (tests/terraform compares the two): for every
# collaborator, every service it uses, every rule of that service, every prefix
# of a matching address family and every group that offers the service.
locals {
  family_protocols = {
    ipv4 = ["tcp", "udp", "icmp"]
    ipv6 = ["tcp", "udp", "icmpv6"]
  }

  unknown_services = distinct(flatten([
    for c in var.collaborators : [for s in c.services : s if !contains(keys(var.catalogue), s)]
  ]))

  flows = distinct(flatten([
    for c in var.collaborators : [
      for service in c.services : [
        for rule in var.catalogue[service].rules : [
          for family in ["ipv4", "ipv6"] : [
            for prefix in(family == "ipv4" ? try(c.prefixes_v4, []) : try(c.prefixes_v6, [])) : [
              for group in var.catalogue[service].offered_by : {
                destination_group = group
                family            = family
                protocol          = rule.protocol
                port_min          = try(tonumber(split("-", rule.ports)[0]), null)
                port_max          = try(tonumber(reverse(split("-", rule.ports))[0]), null)
                source            = prefix
              }
            ] if contains(local.family_protocols[family], rule.protocol)
          ]
        ]
      ]
    ]
  ]))

  # OpenStack security group rules, one per flow.
  security_group_rules = {
    for f in local.flows :
    join(":", [f.destination_group, f.family, f.protocol, coalesce(f.port_min, 0), coalesce(f.port_max, 0), f.source]) => {
      group            = f.destination_group
      ethertype        = f.family == "ipv4" ? "IPv4" : "IPv6"
      protocol         = f.protocol == "icmpv6" ? "ipv6-icmp" : f.protocol
      port_range_min   = f.port_min
      port_range_max   = f.port_max
      remote_ip_prefix = f.source
    }
  }
}

check "services_are_in_the_catalogue" {
  assert {
    condition     = length(local.unknown_services) == 0
    error_message = "Collaborators use services the catalogue does not define: ${join(", ", local.unknown_services)}."
  }
}
