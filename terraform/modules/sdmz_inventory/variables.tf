variable "site" {
  description = "sdmz_local_site of the testbed (lowercase name)."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9_-]*$", var.site))
    error_message = "site must be a lowercase name: a letter, then letters, digits, _ or -."
  }
}

variable "collaborators" {
  description = "sdmz_collaborators, as in the policy file: passed to the inventory unchanged."
  type        = any
}

variable "instances" {
  description = "Per host name: role (dtn|gateway|perfsonar|zeek|wan_emulator), host_number (its address within each subnet), nic_speed_gbps."
  type = map(object({
    role           = string
    host_number    = number
    nic_speed_gbps = number
  }))

  validation {
    condition     = alltrue([for h in values(var.instances) : contains(["dtn", "gateway", "perfsonar", "zeek", "wan_emulator"], h.role)])
    error_message = "Every instance's role must be one of dtn, gateway, perfsonar, zeek, wan_emulator."
  }
}

variable "mgmt_addresses" {
  description = "Per host name: the address Ansible reaches it at (floating IP or management fixed IP)."
  type        = map(string)
}

variable "mgmt_interfaces" {
  description = "Per host name: the management interface's address with prefix length (ADDRESS/LEN)."
  type        = map(string)
}

variable "dmz_cidr" {
  description = "CIDR of the DMZ network."
  type        = string
}

variable "remote_cidr" {
  description = "CIDR of the remote (site B) network behind the wan_emulator."
  type        = string
}

variable "wan_remote_host" {
  description = "Host number of the wan_emulator on the remote network."
  type        = number
  default     = 1
}

variable "dmz_mtu" {
  description = "MTU of the DMZ and remote networks."
  type        = number
}

variable "interface_names" {
  description = "Guest interface names of the management, DMZ and remote ports."
  type = object({
    mgmt   = string
    dmz    = string
    remote = string
  })
}

variable "ansible_user" {
  description = "The account Ansible logs in as (it needs sudo)."
  type        = string
  default     = "cc"
}
