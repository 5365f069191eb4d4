"""An order, the receipt its task sends (once), and a row per execution of that task's body."""

from django.db import models


class Order(models.Model):
    email = models.EmailField()
    status = models.CharField(max_length=20, default="placed")  # placed, packed, shipped
    created_at = models.DateTimeField(auto_now_add=True)


class Receipt(models.Model):
    """The receipt ``send_receipt`` sends: one per order, however often the task's body runs."""

    order = models.OneToOneField(Order, on_delete=models.CASCADE)
    task_id = models.CharField(max_length=64)
    sent_at = models.DateTimeField(auto_now_add=True)


class TaskRun(models.Model):
    """One row each time ``send_receipt``'s body starts (committed at once), to count them."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE)
    task_id = models.CharField(max_length=64)
    pid = models.IntegerField()
    started_at = models.DateTimeField(auto_now_add=True)
