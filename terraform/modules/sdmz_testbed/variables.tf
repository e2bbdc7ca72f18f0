variable "name_prefix" {
  description = "Prefix of every resource name (networks, ports, instances, security groups)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,23}$", var.name_prefix))
    error_message = "name_prefix must be 2-24 characters: a lowercase letter, then lowercase letters, digits or -."
  }
}

variable "site" {
  description = "sdmz_local_site written into the inventory."
  type        = string
  default     = "testbed"
}

variable "roles" {
  description = "Instances per role: count, flavor and NIC speed (Gbit/s). Roles: dtn, gateway, perfsonar, zeek, wan_emulator."
  type = map(object({
    count          = number
    flavor         = string
    nic_speed_gbps = optional(number, 10)
  }))

  validation {
    condition     = alltrue([for r in keys(var.roles) : contains(["dtn", "gateway", "perfsonar", "zeek", "wan_emulator"], r)])
    error_message = "roles: unknown role; the roles are dtn, gateway, perfsonar, zeek and wan_emulator."
  }
  validation {
    condition     = alltrue([for r in values(var.roles) : r.count >= 0 && r.count <= 19 && floor(r.count) == r.count])
    error_message = "roles: every count must be a whole number from 0 to 19."
  }
  validation {
    condition     = alltrue([for r in values(var.roles) : r.nic_speed_gbps > 0])
    error_message = "roles: every nic_speed_gbps must be greater than 0."
  }
  validation {
    condition     = try(var.roles["wan_emulator"].count, 0) <= 1
    error_message = "roles: at most one wan_emulator."
  }
}

variable "image_name" {
  description = "Glance image of every instance (e.g. CC-Ubuntu22.04 on Chameleon, Featured-Ubuntu22 on Jetstream2)."
  type        = string

  validation {
    condition     = length(trimspace(var.image_name)) > 0
    error_message = "image_name must not be empty."
  }
}

variable "key_pair" {
  description = "Nova key pair whose public key is installed for ansible_user."
  type        = string
}

variable "ansible_user" {
  description = "The account the image creates for the key pair (cc on Chameleon images, ubuntu or rocky elsewhere)."
  type        = string
  default     = "cc"
}

variable "external_network_name" {
  description = "The cloud's external (public) network: router gateway and floating-IP pool."
  type        = string
  default     = "public"
}

variable "management_network_name" {
  description = "Use this existing (shared) network for management (e.g. sharednet1 on Chameleon); null creates one."
  type        = string
  default     = null
}

variable "management_cidr" {
  description = "CIDR of the management network the module creates (when management_network_name is null)."
  type        = string
  default     = "10.51.0.0/24"

  validation {
    condition     = can(cidrhost(var.management_cidr, 0)) && !strcontains(var.management_cidr, ":")
    error_message = "management_cidr must be an IPv4 network in CIDR notation, e.g. 10.51.0.0/24."
  }
}

variable "dmz_cidr" {
  description = "CIDR of the DMZ network (site A)."
  type        = string
  default     = "10.52.0.0/24"

  validation {
    condition     = can(cidrhost(var.dmz_cidr, 0)) && !strcontains(var.dmz_cidr, ":")
    error_message = "dmz_cidr must be an IPv4 network in CIDR notation, e.g. 10.52.0.0/24."
  }
}

variable "remote_cidr" {
  description = "CIDR of the emulated collaborator site behind the wan_emulator (site B)."
  type        = string
  default     = "10.53.0.0/24"

  validation {
    condition     = can(cidrhost(var.remote_cidr, 0)) && !strcontains(var.remote_cidr, ":")
    error_message = "remote_cidr must be an IPv4 network in CIDR notation, e.g. 10.53.0.0/24."
  }
}

variable "dmz_mtu" {
  description = "MTU of the DMZ and remote networks, where the cloud allows it (1280-9216)."
  type        = number
  default     = 9000

  validation {
    condition     = var.dmz_mtu >= 1280 && var.dmz_mtu <= 9216
    error_message = "dmz_mtu must be from 1280 to 9216."
  }
}

variable "reservation_id" {
  description = "Blazar reservation id (Chameleon bare metal), passed as the scheduler hint `reservation`; null for none."
  type        = string
  default     = null

  validation {
    condition     = var.reservation_id == null || can(regex("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", var.reservation_id))
    error_message = "reservation_id must be a reservation UUID (openstack reservation lease show LEASE -c reservations)."
  }
}

variable "enable_security_groups" {
  description = "Attach the derived security groups. Chameleon bare metal ignores security groups: set false there and rely on the host firewall roles."
  type        = bool
  default     = true
}

variable "assign_floating_ips" {
  description = "Give every instance a floating IP on its management port (its address for Ansible)."
  type        = bool
  default     = true
}

variable "mgmt_allowed_cidrs" {
  description = "Networks allowed to reach instances over SSH on the management network (the control node's)."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.mgmt_allowed_cidrs : can(cidrhost(c, 0))])
    error_message = "mgmt_allowed_cidrs: every entry must be a network in CIDR notation."
  }
}

variable "interface_names" {
  description = "Interface names the guest OS gives the management, DMZ and remote ports, in attachment order."
  type = object({
    mgmt   = string
    dmz    = string
    remote = string
  })
  default = { mgmt = "ens3", dmz = "ens4", remote = "ens5" }
}

variable "collaborators" {
  description = "sdmz_collaborators (from the policy file): the only outside networks the DMZ security groups admit."
  type        = any
}

variable "catalogue" {
  description = "sdmz_service_catalogue of policy/services.yml."
  type        = any
}
