from django.contrib import admin

from shop.models import Order, Receipt, TaskRun

admin.site.register(Order)
admin.site.register(Receipt)
admin.site.register(TaskRun)
