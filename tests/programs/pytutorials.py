"""pytorch.org/tutorials' vision tutorials as printed, each a function ``tutorial(port) -> dict`` whose only
changes are the port's (``pytutorials_run.py``): models and optimizers built in ``port.scope()``, the
loop body in ``port.run``, the data through ``port.distribute``. Small synthetic data instead of the
downloads, float64, a few steps:

* "Transfer learning for computer vision": ``train_model`` with ``torch.set_grad_enabled(phase ==
  'train')``, ``StepLR``, the best validation accuracy's weights kept with ``copy.deepcopy(model.state_dict())``
  (fine-tuning) or ``torch.save(model.state_dict(), path)`` (the newer text; the fixed feature extractor:
  ``param.requires_grad = False``, the optimizer over ``model.fc.parameters()``) and loaded at the end;
* "Training a Classifier": the CIFAR-10 ``Net``, SGD with momentum, the accuracy on the test set;
* "Spatial Transformer Networks": ``affine_grid`` / ``grid_sample``, ``Dropout2d`` and ``F.dropout``;
* "Adversarial Example Generation": FGSM's ``test`` (``data.requires_grad = True``, ``model.zero_grad()``,
  ``data.grad``; batches of one image, ``continue`` when the first prediction is wrong), and adversarial
  training with the attack inside the step.

This module imports only torch: the DDP runner must not import multidev.
"""
from __future__ import annotations

import copy
import os
import tempfile

import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.optim import lr_scheduler
from torch.utils.data import DataLoader, TensorDataset

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _images(seed: int, n: int, shape: tuple, classes: int) -> TensorDataset:
    """Images whose class follows from their mean over a few pixels (something to learn)."""
    g = _gen(seed)
    x = torch.rand(n, *shape, generator=g, dtype=F64)
    w = torch.randn(x[0].numel(), classes, generator=_gen(seed + 1), dtype=F64)
    return TensorDataset(x, (x.reshape(n, -1) @ w).argmax(1))


def _flat(model) -> list:
    return torch.cat([p.detach().double().reshape(-1) for p in model.parameters()]).tolist()


# --- Transfer learning for computer vision ---------------------------------------------------------------
class TinyResNet(nn.Module):
    """Stands for ``models.resnet18(weights='IMAGENET1K_V1')``: a backbone and an ``fc`` head."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)
        self.avgpool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.avgpool(self.relu(self.conv1(x))), 1))


def _pretrained():
    torch.manual_seed(21)
    return TinyResNet().double()


def _transfer_step(model, criterion, optimizer, phase, inputs, labels):
    """``train_model``'s inner loop body, as printed (``loss.item()`` returned as a tensor)."""
    optimizer.zero_grad()
    with torch.set_grad_enabled(phase == "train"):
        outputs = model(inputs)
        _, preds = torch.max(outputs, 1)
        loss = criterion(outputs, labels)
        if phase == "train":
            loss.backward()
            optimizer.step()
    return loss.detach() * inputs.size(0), torch.sum(preds == labels.data)


def train_model(port, model, criterion, optimizer, scheduler, num_epochs, saved_to_disk):
    dataloaders = {"train": DataLoader(_images(30, 16, (3, 6, 6), 2), batch_size=8, shuffle=True),
                   "val": DataLoader(_images(31, 16, (3, 6, 6), 2), batch_size=8)}
    dataset_sizes = {x: len(dataloaders[x].dataset) for x in ["train", "val"]}
    with tempfile.TemporaryDirectory() as tempdir:
        best_model_params_path = os.path.join(tempdir, "best_model_params.pt")
        best_model_wts = copy.deepcopy(model.state_dict())
        torch.save(model.state_dict(), best_model_params_path)
        best_acc, log = 0.0, []
        for epoch in range(num_epochs):
            for phase in ["train", "val"]:
                model.train() if phase == "train" else model.eval()
                running_loss, running_corrects = 0.0, 0
                for inputs, labels in port.distribute(dataloaders[phase]):
                    loss, corrects = port.run(_transfer_step, args=(model, criterion, optimizer, phase, inputs, labels))
                    running_loss += port.sum(loss)
                    running_corrects += port.sum(corrects)
                if phase == "train":
                    scheduler.step()
                epoch_loss = running_loss / dataset_sizes[phase]
                epoch_acc = running_corrects / dataset_sizes[phase]
                log.append([epoch_loss, epoch_acc, optimizer.param_groups[0]["lr"]])
                if phase == "val" and epoch_acc > best_acc:
                    best_acc = epoch_acc
                    best_model_wts = copy.deepcopy(model.state_dict())
                    torch.save(model.state_dict(), best_model_params_path)
        trained = port.weights(model)["params"]
        if saved_to_disk:
            model.load_state_dict(torch.load(best_model_params_path, weights_only=True))
        else:
            model.load_state_dict(best_model_wts)
    return model, log, trained


def _transfer_result(port, model, log, trained) -> dict:
    model.eval()
    with torch.no_grad():   # visualize_model: the predictions on the validation images, after loading
        outputs = model(_images(31, 16, (3, 6, 6), 2).tensors[0])
    return {**port.weights(model), "log": log, "trained": trained, "outputs": outputs.reshape(-1).tolist()}


def transfer_finetune(port) -> dict:
    torch.manual_seed(0)
    with port.scope():
        model_ft = _pretrained()
        num_ftrs = model_ft.fc.in_features
        model_ft.fc = nn.Linear(num_ftrs, 2).double()
        criterion = nn.CrossEntropyLoss()
        optimizer_ft = optim.SGD(model_ft.parameters(), lr=0.8, momentum=0.9)
        exp_lr_scheduler = lr_scheduler.StepLR(optimizer_ft, step_size=2, gamma=0.1)
    model = port.wrap(model_ft)
    model, log, trained = train_model(port, model, criterion, optimizer_ft, exp_lr_scheduler, 4, saved_to_disk=False)
    return _transfer_result(port, model, log, trained)


def transfer_fixed_feature_extractor(port) -> dict:
    torch.manual_seed(0)
    with port.scope():
        model_conv = _pretrained()
        for param in model_conv.parameters():
            param.requires_grad = False
        num_ftrs = model_conv.fc.in_features
        model_conv.fc = nn.Linear(num_ftrs, 2).double()   # parameters of new modules require grad
        criterion = nn.CrossEntropyLoss()
        optimizer_conv = optim.SGD(model_conv.fc.parameters(), lr=0.8, momentum=0.9)
        exp_lr_scheduler = lr_scheduler.StepLR(optimizer_conv, step_size=2, gamma=0.1)
    model = port.wrap(model_conv)
    model, log, trained = train_model(port, model, criterion, optimizer_conv, exp_lr_scheduler, 4, saved_to_disk=True)
    return _transfer_result(port, model, log, trained)


# --- Training a Classifier (CIFAR-10) ----------------------------------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)   # flatten all dimensions except batch
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def cifar10_classifier(port) -> dict:
    torch.manual_seed(0)
    trainloader = DataLoader(_images(40, 16, (3, 32, 32), 10), batch_size=4, shuffle=True)
    testloader = DataLoader(_images(41, 8, (3, 32, 32), 10), batch_size=4, shuffle=False)
    with port.scope():
        net = Net().double()
        criterion = nn.CrossEntropyLoss()
        optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    model = port.wrap(net)

    def train_step(inputs, labels):
        optimizer.zero_grad()   # zero the parameter gradients
        outputs = model(inputs)   # forward + backward + optimize
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        return loss.detach()

    losses = []
    for epoch in range(2):   # loop over the dataset multiple times
        running_loss = 0.0
        for i, data in enumerate(port.distribute(trainloader), 0):
            inputs, labels = data
            running_loss += port.mean(port.run(train_step, args=(inputs, labels)))
        losses.append(running_loss)
    correct, total = 0, 0
    with torch.no_grad():   # the test set, outside the step: every process evaluates it whole
        for images, labels in testloader:
            outputs = net(images)
            _, predicted = torch.max(outputs, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    return {**port.weights(model), "log": losses + [100 * correct // total]}


# --- Spatial Transformer Networks ----------------------------------------------------------------------------
class StnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)
        self.localization = nn.Sequential(   # Spatial transformer localization-network
            nn.Conv2d(1, 8, kernel_size=7), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
        self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True), nn.Linear(32, 3 * 2))
        # Initialize the weights/bias with identity transformation
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs)
        theta = theta.view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)

    def forward(self, x):
        x = self.stn(x)   # transform the input
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def spatial_transformer(port) -> dict:
    torch.manual_seed(0)
    train_loader = DataLoader(_images(50, 24, (1, 28, 28), 10), batch_size=8, shuffle=True)
    test_loader = DataLoader(_images(51, 8, (1, 28, 28), 10), batch_size=4)
    with port.scope():
        net = StnNet().double()
        optimizer = optim.SGD(net.parameters(), lr=0.05)
    model = port.wrap(net)

    def step(data, target):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss.detach()

    log = []
    for epoch in range(2):
        model.train()
        log += [port.mean(port.run(step, args=(data, target))) for data, target in port.distribute(train_loader)]
        with torch.no_grad():   # test(): the whole test set, outside the step
            model.eval()
            test_loss, correct = 0.0, 0
            for data, target in test_loader:
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()   # sum up batch loss
                pred = output.max(1, keepdim=True)[1]   # get the index of the max log-probability
                correct += pred.eq(target.view_as(pred)).sum().item()
            log += [test_loss / len(test_loader.dataset), correct]
    return {**port.weights(model), "log": log}


# --- Adversarial Example Generation (FGSM) -----------------------------------------------------------------
class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.dropout = nn.Dropout(0.25)
        self.fc1 = nn.Linear(4 * 5 * 5, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = self.dropout(torch.flatten(x, 1))
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def fgsm_attack(image, epsilon, data_grad):
    sign_data_grad = data_grad.sign()   # element-wise sign of the data gradient
    perturbed_image = image + epsilon * sign_data_grad
    return torch.clamp(perturbed_image, 0, 1)   # clipping to maintain [0,1] range


def _fgsm_test_step(model, data, target, epsilon, input_grad=False):
    """``test``'s loop body for one image (the tutorial's batch of 1): 1 when the attack fails;
    ``input_grad``: the gradient with respect to the image from ``torch.autograd.grad`` (the fix
    multidev's refusal of a backward that only some replicas run names), not ``loss.backward()``."""
    data.requires_grad = True   # Set requires_grad attribute of tensor. Important for Attack
    output = model(data)
    init_pred = output.max(1, keepdim=True)[1]   # get the index of the max log-probability
    if init_pred.item() != target.item():   # If the initial prediction is wrong, don't bother attacking
        return torch.zeros((), dtype=torch.int64)
    loss = F.nll_loss(output, target)
    if input_grad:
        data_grad, = torch.autograd.grad(loss, data)
    else:
        model.zero_grad()
        loss.backward()
        data_grad = data.grad.data
    perturbed_data = fgsm_attack(data, epsilon, data_grad)
    final_pred = model(perturbed_data).max(1, keepdim=True)[1]
    return (final_pred.squeeze() == target.squeeze()).long()


def _adversarial_step(model, optimizer, data, target, epsilon):
    """Adversarial training: the FGSM example of each image made in the step, then trained on."""
    data.requires_grad = True
    loss = F.nll_loss(model(data), target)
    model.zero_grad()
    loss.backward()
    perturbed_data = fgsm_attack(data, epsilon, data.grad.data).detach()
    optimizer.zero_grad()
    loss = 0.5 * F.nll_loss(model(data.detach()), target) + 0.5 * F.nll_loss(model(perturbed_data), target)
    loss.backward()
    optimizer.step()
    return loss.detach()


def fgsm(port, input_grad=False) -> dict:
    torch.manual_seed(0)
    train_loader = DataLoader(_images(60, 16, (1, 12, 12), 10), batch_size=8, shuffle=True)
    test_loader = DataLoader(_images(61, 12, (1, 12, 12), 10), batch_size=2)   # 1 per process, as printed
    with port.scope():
        net = LeNet().double()
        optimizer = optim.Adam(net.parameters(), lr=0.05)
    model = port.wrap(net)
    log = []
    for epsilon in (0.0, 0.3):
        model.eval()   # the tutorial attacks a trained model in evaluation mode
        correct = sum(port.sum(port.run(_fgsm_test_step, args=(net, data, target, epsilon, input_grad)))   # net: not DDP's
                      for data, target in port.distribute(test_loader))
        log.append(correct / len(test_loader.dataset))
        model.train()
        log += [port.mean(port.run(_adversarial_step, args=(model, optimizer, data, target, 0.1)))
                for data, target in port.distribute(train_loader)]
    return {**port.weights(model), "log": log}


def fgsm_autograd_grad(port) -> dict:
    return fgsm(port, input_grad=True)


TUTORIALS = {"transfer_finetune": transfer_finetune, "transfer_fixed_feature_extractor": transfer_fixed_feature_extractor,
             "cifar10_classifier": cifar10_classifier, "spatial_transformer": spatial_transformer, "fgsm": fgsm,
             "fgsm_autograd_grad": fgsm_autograd_grad}
