# The inventory, in exactly the shape inventories/ uses (docs/inventory.md), so
# `terraform output -raw inventory > inventories/testbed/hosts.yml` followed by
# `ansible-playbook -i inventories/testbed playbooks/site.yml` works unchanged.
# No resources: tests apply this module offline and run validate.yml on it.
locals {
  groups = ["dtn", "gateway", "perfsonar", "zeek", "wan_emulator"]

  interfaces = {
    for name, h in var.instances : name => concat(
      [{ name = var.interface_names.mgmt, role = "mgmt", ipv4 = var.mgmt_interfaces[name], mtu = 1500 }],
      [{
        name       = var.interface_names.dmz
        role       = h.role == "zeek" ? "capture" : (h.role == "wan_emulator" ? "wan" : "dmz")
        ipv4       = "${cidrhost(var.dmz_cidr, h.host_number)}/${split("/", var.dmz_cidr)[1]}"
        mtu        = var.dmz_mtu
        speed_gbps = h.nic_speed_gbps
      }],
      h.role == "wan_emulator" ? [{
        name = var.interface_names.remote
        role = "lan"
        ipv4 = "${cidrhost(var.remote_cidr, var.wan_remote_host)}/${split("/", var.remote_cidr)[1]}"
        mtu  = var.dmz_mtu
      }] : []
    )
  }

  host_vars = {
    for name, h in var.instances : name => merge(
      {
        sdmz_site         = var.site
        sdmz_mgmt_address = var.mgmt_addresses[name]
        sdmz_interfaces   = local.interfaces[name]
        ansible_host      = var.mgmt_addresses[name]
      },
      contains(["dtn", "gateway", "perfsonar"], h.role) ? { sdmz_nic_speed_gbps = h.nic_speed_gbps } : {},
      h.role == "zeek" ? { sdmz_zeek_node_roles = ["manager", "logger", "proxy", "worker"] } : {},
      h.role == "wan_emulator" ? { sdmz_forwarding = true } : {},
    )
  }

  inventory = {
    all = {
      vars = {
        sdmz_local_site    = var.site
        sdmz_collaborators = var.collaborators
      }
      children = {
        testbed = {
          vars = {
            ansible_user   = var.ansible_user
            ansible_become = true
          }
          children = {
            for g in local.groups : g => {
              hosts = { for name, h in var.instances : name => local.host_vars[name] if h.role == g }
            } if length([for h in values(var.instances) : h if h.role == g]) > 0
          }
        }
      }
    }
  }
}
