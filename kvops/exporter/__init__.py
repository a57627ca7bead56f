"""kvops.exporter"""
