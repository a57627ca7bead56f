"""kvops.bench"""
