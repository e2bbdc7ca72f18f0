variable "collaborators" {
  description = "Collaborators (sdmz_collaborators): name, contact, prefixes_v4, prefixes_v6, services."
  type        = any

  validation {
    condition     = alltrue([for c in var.collaborators : length(concat(try(c.prefixes_v4, []), try(c.prefixes_v6, []))) > 0])
    error_message = "Every collaborator needs at least one prefix in prefixes_v4 or prefixes_v6."
  }
  validation {
    condition = alltrue(flatten([for c in var.collaborators : [
      for p in concat(try(c.prefixes_v4, []), try(c.prefixes_v6, [])) : can(cidrhost(p, 0))
    ]]))
    error_message = "Every collaborator prefix must be a network in CIDR notation."
  }
}

variable "catalogue" {
  description = "The services catalogue (sdmz_service_catalogue of policy/services.yml): service -> {offered_by, rules}."
  type        = any
}
