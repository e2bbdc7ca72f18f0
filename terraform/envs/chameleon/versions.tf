terraform {
  required_version = ">= 1.8"

  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = "1.54.1"
    }
  }
}

# Credentials come from clouds.yaml (an application credential); see clouds.yaml.example.
provider "openstack" {
  cloud = var.cloud
}
