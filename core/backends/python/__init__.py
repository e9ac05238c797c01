"""backends/python"""
