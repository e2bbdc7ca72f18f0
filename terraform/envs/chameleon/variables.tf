variable "cloud" {
  description = "Entry of clouds.yaml to use (an application credential of your Chameleon project and site)."
  type        = string
  default     = "chameleon"
}

variable "name_prefix" {
  description = "Prefix of every resource name."
  type        = string
  default     = "sdmz"
}

variable "reservation_id" {
  description = "The reservation id of your Blazar lease (openstack reservation lease show LEASE): bare metal nodes come from it."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", var.reservation_id))
    error_message = "reservation_id must be the reservation UUID of a Blazar lease (not the lease id or name)."
  }
}

variable "roles" {
  description = "Nodes per role. Every node is a whole bare metal machine from the lease."
  type = map(object({
    count          = number
    flavor         = string
    nic_speed_gbps = optional(number, 10)
  }))
  default = {
    dtn          = { count = 2, flavor = "baremetal", nic_speed_gbps = 10 }
    perfsonar    = { count = 1, flavor = "baremetal", nic_speed_gbps = 10 }
    wan_emulator = { count = 1, flavor = "baremetal", nic_speed_gbps = 10 }
  }
}

variable "image_name" {
  description = "Chameleon-supported image."
  type        = string
  default     = "CC-Ubuntu22.04"
}

variable "key_pair" {
  description = "Nova key pair for the cc account."
  type        = string
}

variable "dmz_mtu" {
  description = "MTU of the DMZ network (Chameleon isolated networks carry jumbo frames at most sites)."
  type        = number
  default     = 9000
}

variable "mgmt_allowed_cidrs" {
  description = "Networks of the control node (recorded; Chameleon bare metal ignores security groups)."
  type        = list(string)
  default     = []
}

variable "policy_file" {
  description = "YAML with sdmz_local_site and sdmz_collaborators; null: terraform/envs/testbed-policy.yml."
  type        = string
  default     = null
}

variable "catalogue_file" {
  description = "The services catalogue; null: policy/services.yml."
  type        = string
  default     = null
}
