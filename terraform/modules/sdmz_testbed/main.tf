# A Science DMZ testbed on OpenStack: a DMZ network (site A), an emulated
# collaborator site behind a WAN emulator (site B), management, a router to
# the external network, instances per role, floating IPs by port, and security
# groups derived from the same policy the network ACLs use.

locals {
  # Host addresses are fixed per role, so the inventory and the policy never
  # depend on DHCP order: role base + index within the role.
  role_offsets = { dtn = 10, gateway = 30, perfsonar = 50, zeek = 70, wan_emulator = 90 }
  role_names   = { dtn = "dtn", gateway = "gw", perfsonar = "ps", zeek = "zeek", wan_emulator = "wan" }

  instances = {
    for item in flatten([
      for role, spec in var.roles : [
        for i in range(spec.count) : {
          name           = "${local.role_names[role]}${i + 1}"
          role           = role
          flavor         = spec.flavor
          nic_speed_gbps = spec.nic_speed_gbps
          host_number    = local.role_offsets[role] + i
        }
      ]
    ]) : item.name => item
  }

  wan_emulator    = try(var.roles["wan_emulator"].count, 0) > 0
  manage_network  = var.management_network_name == null
  management_id   = local.manage_network ? openstack_networking_network_v2.management[0].id : data.openstack_networking_network_v2.management[0].id
  mgmt_prefixlen  = split("/", var.management_cidr)[1]
  policy_groups   = toset(module.policy.groups)
  wan_remote_host = 1
}

module "policy" {
  source        = "../sdmz_policy"
  collaborators = var.collaborators
  catalogue     = var.catalogue
}

data "openstack_networking_network_v2" "external" {
  name     = var.external_network_name
  external = true
}

data "openstack_networking_network_v2" "management" {
  count = local.manage_network ? 0 : 1
  name  = var.management_network_name
}

# The shared management network's subnet (its prefix length goes into the inventory).
data "openstack_networking_subnet_v2" "management" {
  count      = local.manage_network ? 0 : 1
  network_id = data.openstack_networking_network_v2.management[0].id
  ip_version = 4
}

# --- networks -------------------------------------------------------------

resource "openstack_networking_network_v2" "management" {
  count          = local.manage_network ? 1 : 0
  name           = "${var.name_prefix}-mgmt"
  admin_state_up = true
}

resource "openstack_networking_subnet_v2" "management" {
  count      = local.manage_network ? 1 : 0
  name       = "${var.name_prefix}-mgmt"
  network_id = openstack_networking_network_v2.management[0].id
  cidr       = var.management_cidr
  ip_version = 4
}

resource "openstack_networking_network_v2" "dmz" {
  name           = "${var.name_prefix}-dmz"
  admin_state_up = true
  mtu            = var.dmz_mtu
}

resource "openstack_networking_subnet_v2" "dmz" {
  name       = "${var.name_prefix}-dmz"
  network_id = openstack_networking_network_v2.dmz.id
  cidr       = var.dmz_cidr
  ip_version = 4
}

resource "openstack_networking_network_v2" "remote" {
  count          = local.wan_emulator ? 1 : 0
  name           = "${var.name_prefix}-remote"
  admin_state_up = true
  mtu            = var.dmz_mtu
}

resource "openstack_networking_subnet_v2" "remote" {
  count      = local.wan_emulator ? 1 : 0
  name       = "${var.name_prefix}-remote"
  network_id = openstack_networking_network_v2.remote[0].id
  cidr       = var.remote_cidr
  ip_version = 4
  no_gateway = true
}

resource "openstack_networking_router_v2" "this" {
  name                = "${var.name_prefix}-router"
  admin_state_up      = true
  external_network_id = data.openstack_networking_network_v2.external.id
}

resource "openstack_networking_router_interface_v2" "dmz" {
  router_id = openstack_networking_router_v2.this.id
  subnet_id = openstack_networking_subnet_v2.dmz.id
}

resource "openstack_networking_router_interface_v2" "management" {
  count     = local.manage_network ? 1 : 0
  router_id = openstack_networking_router_v2.this.id
  subnet_id = openstack_networking_subnet_v2.management[0].id
}

# --- security groups (ignored by Chameleon bare metal; see the README) -----

resource "openstack_networking_secgroup_v2" "management" {
  count                = var.enable_security_groups ? 1 : 0
  name                 = "${var.name_prefix}-mgmt"
  description          = "SSH from the control node (mgmt_allowed_cidrs)"
  delete_default_rules = false
}

resource "openstack_networking_secgroup_rule_v2" "management_ssh" {
  for_each          = var.enable_security_groups ? toset(var.mgmt_allowed_cidrs) : toset([])
  security_group_id = openstack_networking_secgroup_v2.management[0].id
  direction         = "ingress"
  ethertype         = strcontains(each.value, ":") ? "IPv6" : "IPv4"
  protocol          = "tcp"
  port_range_min    = 22
  port_range_max    = 22
  remote_ip_prefix  = each.value
}

resource "openstack_networking_secgroup_v2" "internal" {
  count       = var.enable_security_groups ? 1 : 0
  name        = "${var.name_prefix}-internal"
  description = "Everything between the testbed's own DMZ and remote networks"
}

resource "openstack_networking_secgroup_rule_v2" "internal" {
  for_each          = var.enable_security_groups ? toset(compact([var.dmz_cidr, local.wan_emulator ? var.remote_cidr : ""])) : toset([])
  security_group_id = openstack_networking_secgroup_v2.internal[0].id
  direction         = "ingress"
  ethertype         = "IPv4"
  remote_ip_prefix  = each.value
}

# One group per role that offers services; its rules are the policy's flows.
resource "openstack_networking_secgroup_v2" "service" {
  for_each    = var.enable_security_groups ? local.policy_groups : toset([])
  name        = "${var.name_prefix}-${each.value}"
  description = "Collaborator flows to ${each.value} hosts (derived from the services catalogue)"
}

resource "openstack_networking_secgroup_rule_v2" "service" {
  for_each          = var.enable_security_groups ? module.policy.security_group_rules : {}
  security_group_id = openstack_networking_secgroup_v2.service[each.value.group].id
  direction         = "ingress"
  ethertype         = each.value.ethertype
  protocol          = each.value.protocol
  port_range_min    = each.value.port_range_min
  port_range_max    = each.value.port_range_max
  remote_ip_prefix  = each.value.remote_ip_prefix
}

# --- ports and instances -------------------------------------------------------

resource "openstack_networking_port_v2" "management" {
  for_each       = local.instances
  name           = "${var.name_prefix}-${each.key}-mgmt"
  network_id     = local.management_id
  admin_state_up = true
  security_group_ids = var.enable_security_groups ? [
    openstack_networking_secgroup_v2.management[0].id, openstack_networking_secgroup_v2.internal[0].id
  ] : null

  dynamic "fixed_ip" {
    for_each = local.manage_network ? [1] : []
    content {
      subnet_id  = openstack_networking_subnet_v2.management[0].id
      ip_address = cidrhost(var.management_cidr, each.value.host_number)
    }
  }
}

resource "openstack_networking_port_v2" "dmz" {
  for_each       = local.instances
  name           = "${var.name_prefix}-${each.key}-dmz"
  network_id     = openstack_networking_network_v2.dmz.id
  admin_state_up = true
  # A WAN emulator routes other hosts' packets: no anti-spoofing on its ports.
  port_security_enabled = each.value.role == "wan_emulator" ? false : null
  security_group_ids = var.enable_security_groups && each.value.role != "wan_emulator" ? concat(
    [openstack_networking_secgroup_v2.internal[0].id],
    contains(module.policy.groups, each.value.role) ? [openstack_networking_secgroup_v2.service[each.value.role].id] : []
  ) : null

  fixed_ip {
    subnet_id  = openstack_networking_subnet_v2.dmz.id
    ip_address = cidrhost(var.dmz_cidr, each.value.host_number)
  }
}

resource "openstack_networking_port_v2" "remote" {
  for_each              = { for k, v in local.instances : k => v if v.role == "wan_emulator" }
  name                  = "${var.name_prefix}-${each.key}-remote"
  network_id            = openstack_networking_network_v2.remote[0].id
  admin_state_up        = true
  port_security_enabled = false

  fixed_ip {
    subnet_id  = openstack_networking_subnet_v2.remote[0].id
    ip_address = cidrhost(var.remote_cidr, local.wan_remote_host)
  }
}

resource "openstack_compute_instance_v2" "this" {
  for_each    = local.instances
  name        = "${var.name_prefix}-${each.key}"
  image_name  = var.image_name
  flavor_name = each.value.flavor
  key_pair    = var.key_pair

  network {
    port = openstack_networking_port_v2.management[each.key].id
  }
  network {
    port = openstack_networking_port_v2.dmz[each.key].id
  }
  dynamic "network" {
    for_each = each.value.role == "wan_emulator" ? [openstack_networking_port_v2.remote[each.key].id] : []
    content {
      port = network.value
    }
  }

  # Chameleon bare metal: the Blazar reservation the nodes come from.
  dynamic "scheduler_hints" {
    for_each = var.reservation_id == null ? [] : [var.reservation_id]
    content {
      additional_properties = { reservation = scheduler_hints.value }
    }
  }

  metadata = {
    sdmz_role = each.value.role
  }
}

# Floating IPs by port (the compute floating-IP resources are gone in provider 3.x).
resource "openstack_networking_floatingip_v2" "management" {
  for_each = var.assign_floating_ips ? local.instances : {}
  pool     = var.external_network_name
}

resource "openstack_networking_floatingip_associate_v2" "management" {
  for_each    = var.assign_floating_ips ? local.instances : {}
  floating_ip = openstack_networking_floatingip_v2.management[each.key].address
  port_id     = openstack_networking_port_v2.management[each.key].id
}

# --- the inventory -----------------------------------------------------------------

locals {
  mgmt_fixed_ip = {
    for k, v in local.instances : k => (
      local.manage_network ? cidrhost(var.management_cidr, v.host_number)
      : openstack_networking_port_v2.management[k].all_fixed_ips[0]
    )
  }
  mgmt_prefix = {
    for k, v in local.instances : k => (
      local.manage_network ? local.mgmt_prefixlen : split("/", data.openstack_networking_subnet_v2.management[0].cidr)[1]
    )
  }
}

module "inventory" {
  source          = "../sdmz_inventory"
  site            = var.site
  collaborators   = var.collaborators
  instances       = { for k, v in local.instances : k => { role = v.role, host_number = v.host_number, nic_speed_gbps = v.nic_speed_gbps } }
  mgmt_addresses  = { for k in keys(local.instances) : k => var.assign_floating_ips ? openstack_networking_floatingip_v2.management[k].address : local.mgmt_fixed_ip[k] }
  mgmt_interfaces = { for k in keys(local.instances) : k => "${local.mgmt_fixed_ip[k]}/${local.mgmt_prefix[k]}" }
  dmz_cidr        = var.dmz_cidr
  remote_cidr     = var.remote_cidr
  wan_remote_host = local.wan_remote_host
  dmz_mtu         = var.dmz_mtu
  interface_names = var.interface_names
  ansible_user    = var.ansible_user
}
