variable "cloud" {
  description = "Entry of clouds.yaml to use (a Jetstream2 application credential)."
  type        = string
  default     = "openstack"
}

variable "name_prefix" {
  description = "Prefix of every resource name."
  type        = string
  default     = "sdmz"
}

variable "roles" {
  description = "Instances per role (Jetstream2 flavors: m3.small ... m3.2xl)."
  type = map(object({
    count          = number
    flavor         = string
    nic_speed_gbps = optional(number, 10)
  }))
  default = {
    dtn          = { count = 2, flavor = "m3.large", nic_speed_gbps = 10 }
    gateway      = { count = 1, flavor = "m3.medium", nic_speed_gbps = 10 }
    perfsonar    = { count = 1, flavor = "m3.medium", nic_speed_gbps = 10 }
    zeek         = { count = 1, flavor = "m3.medium", nic_speed_gbps = 10 }
    wan_emulator = { count = 1, flavor = "m3.small", nic_speed_gbps = 10 }
  }
}

variable "image_name" {
  description = "Jetstream2 featured image."
  type        = string
  default     = "Featured-Ubuntu22"
}

variable "key_pair" {
  description = "Nova key pair for the ubuntu account."
  type        = string
}

variable "dmz_mtu" {
  description = "MTU of the DMZ network. 1500 is safe on Jetstream2 tenant networks; raise it only where your allocation's networks carry jumbo frames."
  type        = number
  default     = 1500
}

variable "mgmt_allowed_cidrs" {
  description = "Networks of the control node, allowed to SSH to the instances."
  type        = list(string)

  validation {
    condition     = length(var.mgmt_allowed_cidrs) > 0
    error_message = "mgmt_allowed_cidrs: give the control node's network, or no one can reach the instances over SSH."
  }
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
